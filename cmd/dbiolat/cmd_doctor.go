package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/dbiolat/dbiolat/internal/postgres"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/session"
	"github.com/dbiolat/dbiolat/internal/usdt"
)

func runDoctorCmd(ctx context.Context, args []string) error {
	var o targetOptions
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.IntVar(&o.PID, "pid", 0, "check the PostgreSQL instance this process belongs to")
	fs.StringVar(&o.PGData, "pgdata", "", "check the PostgreSQL instance serving this data directory")
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	return runDoctor(o)
}

// runDoctor checks, in the order a trace needs them, everything dbiolat
// depends on, and says plainly what will and will not work.
func runDoctor(o targetOptions) error {
	failed := 0
	check := func(what string, err error, fix string) bool {
		if err != nil {
			failed++
			fmt.Printf("FAIL  %s: %v\n", what, err)
			if fix != "" {
				fmt.Printf("      %s\n", fix)
			}
			return false
		}
		fmt.Printf("ok    %s\n", what)
		return true
	}
	privOK := check("privileges (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN)", session.CheckPrivileges(), "")
	check("kernel BTF (/sys/kernel/btf/vmlinux)", session.CheckBTF(), "")
	if privOK {
		mounted, err := session.EnsureTracefs()
		if check("tracefs at "+session.TracefsDir, err, "") && mounted {
			fmt.Printf("      (it was not mounted: dbiolat mounted it)\n")
		}
		t, err := probe.Open(probe.All, probe.EmitNone)
		if check("load and attach the kernel programs (tracepoints: syscalls, block, sched)", err, "") {
			t.Close()
		}
	}

	var instances []postgres.Instance
	var err error
	switch {
	case o.PID != 0:
		var in postgres.Instance
		in, err = postgres.ByPID(o.PID)
		instances = []postgres.Instance{in}
	case o.PGData != "":
		var in postgres.Instance
		in, err = postgres.ByDataDir(o.PGData)
		instances = []postgres.Instance{in}
	default:
		instances, err = postgres.Discover()
		if err == nil && len(instances) == 0 {
			err = errors.New("no running PostgreSQL found")
		}
	}
	if check("find PostgreSQL", err, "start it, or name it with --pid or --pgdata") {
		for _, in := range instances {
			exe, _ := os.Readlink(in.Binary)
			fmt.Printf("      instance pid %d, data %s, binary %s\n", in.PID, in.DataDir, exe)
			probes, err := usdt.Open(in.Binary)
			if errors.Is(err, usdt.ErrNoProbes) {
				err = errors.New("no USDT probes (built without --enable-dtrace): file system, block and CPU rates by role work, per-query records do not")
			}
			if check("  USDT probes in its binary", err, "") {
				fmt.Printf("      %d probe sites; query__start %d, query__done %d\n", len(probes),
					len(usdt.Find(probes, postgres.Provider, postgres.QueryStart)), len(usdt.Find(probes, postgres.Provider, postgres.QueryDone)))
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed: see above", failed)
	}
	fmt.Println("\nall checks passed: slowlog, hist and iops will work")
	return nil
}
