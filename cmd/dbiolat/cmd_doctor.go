package main

import (
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/output"
	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
	"github.com/dbiolat/dbiolat/internal/storage"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

func runDoctorCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
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
		t, err := probe.Open(probe.All, probe.EmitNone)
		if check("load and attach the kernel programs (tracepoints: sock, syscalls, block, sched)", err, "") {
			t.Close()
		}
	}

	instances, mysqls, err := session.Servers(o.PID, o.PGData)
	if check("find PostgreSQL, MySQL or MariaDB", err, "") {
		for _, in := range instances {
			exe, _ := os.Readlink(in.Binary)
			probes, err := usdt.Open(in.Binary)
			if errors.Is(err, usdt.ErrNoProbes) {
				err = errors.New("no USDT probes (built without --enable-dtrace): queries are traced from the client protocol, but lock waits count as other waits, and --usdt and --buffers do not work")
			}
			if check(fmt.Sprintf("USDT probes of instance pid %d (data %s, binary %s)", in.PID, in.DataDir, exe), err, "") {
				info("%d probe sites; query__start %d, query__done %d", len(probes),
					len(usdt.Find(probes, postgres.Provider, postgres.QueryStart)), len(usdt.Find(probes, postgres.Provider, postgres.QueryDone)))
			}
			checkStorage(check, info, in.DataDir)
		}
		for _, in := range mysqls {
			exe, _ := os.Readlink(in.Binary)
			check(fmt.Sprintf("%s server pid %d (data %s, binary %s)", in.Flavor, in.PID, in.DataDir, exe), nil, "")
			info("%s", mysqlAbilities(in))
			checkStorage(check, info, in.DataDir)
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

// mysqlAbilities says what a trace of a MySQL server will see, by what its
// binary and libraries export and what its threads' stacks tell.
func mysqlAbilities(in mysql.Instance) string {
	var says []string
	says = append(says, "queries from MySQL's client protocol, prepared statements too")
	if exports(in.Binary, mysql.WaitBegin, mysql.WaitEnd) {
		says = append(says, "waits named by thd_wait_begin (row, metadata, table locks: lock; disk I/O: I/O wait)")
	} else {
		says = append(says, "no thd_wait_begin: lock waits count as other waits")
	}
	if lib, _ := elfvar.Library(in.PID, probe.OpenSSL.Library); lib != "" && exports(lib, probe.OpenSSL.Read, probe.OpenSSL.Write) {
		says = append(says, "TLS connections read at "+lib)
	} else {
		says = append(says, "no OpenSSL to probe: TLS connections are counted, not traced")
	}
	roles := map[string]int{}
	if t, err := mysql.NewThreads(in); err == nil {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", in.PID))
		for _, task := range tasks {
			if tid, err := strconv.Atoi(task.Name()); err == nil {
				if role, ok := t.ThreadRole(tid); ok {
					roles[role]++
				}
			}
		}
	}
	if len(roles) == 0 {
		says = append(says, "its threads' roles cannot be told: their I/O shows as the server's")
	} else {
		var rs []string
		for _, r := range slices.Sorted(maps.Keys(roles)) {
			rs = append(rs, fmt.Sprintf("%s %d", r, roles[r]))
		}
		says = append(says, "threads by role: "+strings.Join(rs, ", "))
	}
	return strings.Join(says, "; ")
}

// exports says the ELF file defines every function named.
func exports(file string, names ...string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	syms, _ := f.DynamicSymbols()
	for _, name := range names {
		if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == name && s.Value != 0 }) {
			return false
		}
	}
	return true
}

// checkStorage says what a data directory's I/O goes through: the layers
// a compare verdict can name, and a storage engine to follow.
func checkStorage(check func(string, error, string) bool, info func(string, ...any), dataDir string) {
	stack, err := storage.Of(dataDir)
	if check(fmt.Sprintf("storage under the data directory %s", dataDir), err, "") {
		info("%s", stack)
	}
}
