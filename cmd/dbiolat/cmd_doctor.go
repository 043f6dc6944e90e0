package main

import (
	"context"
	"fmt"

	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
	"github.com/dbiolat/dbiolat/internal/storage"
)

func runDoctorCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := newFlagSet("doctor")
	fs.IntVar(&o.PID, "pid", 0, "check the PostgreSQL instance, or the MySQL or MariaDB server, this process belongs to")
	fs.StringVar(&o.PGData, "pgdata", "", "check the server (PostgreSQL, MySQL or MariaDB) serving this data directory")
	fs.StringVar(&o.PGData, "datadir", "", "the same as --pgdata (mysqld's name for it)")
	fs.BoolVar(&o.JSON, "json", false, "print the checks as one JSON object")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return runDoctor(o)
}

// doctorCheck is one line of the doctor's report.
type doctorCheck struct {
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Fix   string `json:"fix,omitempty"`
	Info  string `json:"info,omitempty"`
}

// runDoctor checks, in the order a trace needs them, everything dbiolat
// depends on, and says plainly what will and will not work.
func runDoctor(o targetOptions) error {
	var checks []doctorCheck
	failed := 0
	check := func(what string, err error, fix string) bool {
		c := doctorCheck{Check: what, OK: err == nil}
		if err != nil {
			failed++
			c.Error, c.Fix = err.Error(), fix
		}
		checks = append(checks, c)
		return err == nil
	}
	info := func(f string, a ...any) { checks[len(checks)-1].Info += fmt.Sprintf(f, a...) }
	privOK := check("privileges (CAP_BPF, CAP_PERFMON)", session.CheckPrivileges(), "")
	check("kernel BTF (/sys/kernel/btf/vmlinux)", session.CheckBTF(), "")
	if privOK {
		mounted, err := session.EnsureTracefs()
		if check("tracefs at "+session.TracefsDir, err, "") && mounted {
			info("it was not mounted: dbiolat mounted it")
		}
		t, err := probe.Open(probe.All|probe.MySQLWire, probe.EmitNone)
		if check("load and attach the kernel programs (tracepoints: sock, syscalls, block, sched)", err, "") {
			t.Close()
		}
	}

	servers, err := session.Doctor(o.PID, o.PGData)
	if check("find PostgreSQL, MySQL or MariaDB", err, "") {
		for _, sv := range servers {
			if check(sv.Name, sv.Err, "") {
				info("%s", sv.Info)
			}
			if sv.DataDir != "" { // a server's last check
				checkStorage(check, info, sv.DataDir)
			}
		}
	}

	if o.JSON {
		if err := output.NewJSON(stdout).Write(map[string]any{"type": "doctor", "checks": checks}); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			if c.OK {
				fmt.Fprintf(stdout, "ok    %s\n", c.Check)
			} else {
				fmt.Fprintf(stdout, "FAIL  %s: %s\n", c.Check, c.Error)
			}
			for _, extra := range []string{c.Fix, c.Info} {
				if extra != "" {
					fmt.Fprintf(stdout, "      %s\n", extra)
				}
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed: see the report", failed)
	}
	if !o.JSON {
		fmt.Fprintln(stdout, "\nall checks passed: slowlog, hist and iops will work")
	}
	return nil
}

// checkStorage says what a data directory's I/O goes through: the layers
// a compare verdict can name, and a storage engine to follow.
func checkStorage(check func(string, error, string) bool, info func(string, ...any), dataDir string) {
	stack, err := storage.Of(dataDir)
	if check(fmt.Sprintf("storage under the data directory %s", dataDir), err, "") {
		info("%s", stack)
	}
}
