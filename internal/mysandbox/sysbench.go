package mysandbox

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
)

// SysbenchOptions configures a sysbench run. The zero value runs
// oltp_read_write with sysbench's defaults.
type SysbenchOptions struct {
	Test      string // a sysbench OLTP test, e.g. "oltp_point_select"; "" = "oltp_read_write"
	Tables    int    // --tables; 0 = sysbench's 1
	TableSize int    // --table-size, rows per table; 0 = sysbench's 10000
	Threads   int    // --threads, one connection each; 0 = sysbench's 1
	Events    int    // --events, transactions in all; 0 = no limit
	Time      int    // --time, seconds; 0 = sysbench's 10, or no limit when Events is set
	// PSMode is --db-ps-mode: "auto" (sysbench's default) runs every
	// statement, BEGIN and COMMIT included, as a server-side prepared
	// statement; "disable" sends them as text.
	PSMode string
	// Seed is --rand-seed; 0 = sysbench's, the clock's seconds: two runs
	// within one second then repeat the same statements, and the second's
	// updates, setting values already set, change no row.
	Seed int
	// TLSDir, if set, has sysbench connect over TCP to the server's Port
	// on 127.0.0.1 with --mysql-ssl=on, instead of through its socket (the
	// server needs a port and TLS settings: ssl_cert, ssl_key, ssl_ca).
	// sysbench 1.0 reads its CA and client certificate from fixed names in
	// its working directory, cacert.pem, client-cert.pem and
	// client-key.pem: it runs in TLSDir, which holds them.
	TLSDir string
	Extra  []string // more options, e.g. "--range_selects=off"
}

// SysbenchResult is what sysbench 1.0's run phase reports: its "SQL
// statistics" block and its event count.
//
// sysbench sorts statements by their outcome, not their kind: read if it
// returned rows, else write if it changed a row, else other. BEGIN and
// COMMIT are other, and so is an UPDATE or DELETE that changed nothing. A
// statement that failed with an ignored error is in none of them.
type SysbenchResult struct {
	Read, Write, Other, Total uint64 // "queries performed", by outcome
	Transactions, Queries     uint64
	Events                    uint64 // "total number of events"
	Errors                    uint64 // "ignored errors" (deadlocks), each an event retried
	Reconnects                uint64
	Time                      time.Duration // "total time"
}

// Sysbench runs sysbench's phase ("prepare", "run" or "cleanup") of
// o.Test against database sbtest as the server's root user, over the
// socket (over TCP and TLS with o.TLSDir). prepare creates the database if it is
// missing. For run it returns the parsed report (ParseSysbench); for the
// others, a zero result.
func (s *Server) Sysbench(ctx context.Context, o SysbenchOptions, phase string) (SysbenchResult, error) {
	if s.bin["sysbench"] == "" {
		return SysbenchResult{}, fmt.Errorf("mysandbox: no sysbench on PATH: %w", ErrNotInstalled)
	}
	if phase == "prepare" {
		if _, err := s.SQL(ctx, "", "CREATE DATABASE IF NOT EXISTS sbtest"); err != nil {
			return SysbenchResult{}, err
		}
	}
	conn := []string{"--mysql-user=root"}
	switch {
	case o.TLSDir != "" && s.Port == 0:
		return SysbenchResult{}, fmt.Errorf("mysandbox: sysbench over TLS connects over TCP, and the server has no port")
	case o.TLSDir != "":
		conn = append(conn, "--mysql-host=127.0.0.1", "--mysql-port="+strconv.Itoa(s.Port), "--mysql-ssl=on")
	default:
		conn = append(conn, "--mysql-socket="+s.Socket)
	}
	return RunSysbench(s.command(ctx, "sysbench"), conn, o, phase)
}

// RunSysbench runs sysbench's phase of o.Test against database sbtest,
// which must exist, connecting as conn says (its --mysql-* options), as
// cmd (sysbench, with its environment) runs: any server of MySQL's
// protocol, MySQL 9's too (Debian 12's sysbench links MariaDB's client
// library, which speaks caching_sha2_password).
func RunSysbench(cmd *exec.Cmd, conn []string, o SysbenchOptions, phase string) (SysbenchResult, error) {
	if phase != "prepare" && phase != "run" && phase != "cleanup" {
		return SysbenchResult{}, fmt.Errorf("mysandbox: sysbench phase %q is none of prepare, run and cleanup", phase)
	}
	test := o.Test
	if test == "" {
		test = "oltp_read_write"
	}
	args := append([]string{test, "--db-driver=mysql", "--mysql-db=sbtest"}, conn...)
	for _, f := range []struct {
		name string
		v    int
	}{{"tables", o.Tables}, {"table-size", o.TableSize}, {"threads", o.Threads}, {"events", o.Events}, {"time", o.Time}, {"rand-seed", o.Seed}} {
		if f.v > 0 {
			args = append(args, "--"+f.name+"="+strconv.Itoa(f.v))
		}
	}
	if o.Events > 0 && o.Time == 0 {
		args = append(args, "--time=0")
	}
	if o.PSMode != "" {
		args = append(args, "--db-ps-mode="+o.PSMode)
	}
	args = append(args, o.Extra...)
	cmd.Args = append(cmd.Args, append(args, phase)...)
	if o.TLSDir != "" {
		cmd.Dir = o.TLSDir
	}
	out, err := cmdrun.Run(cmd, nil, "sysbench")
	if err != nil || phase != "run" {
		return SysbenchResult{}, err
	}
	return ParseSysbench(out)
}

// ParseSysbench parses the report of sysbench 1.0's run phase, e.g.
//
//	SQL statistics:
//	    queries performed:
//	        read:                            280
//	        write:                           80
//	        other:                           40
//	        total:                           400
//	    transactions:                        20     (157.19 per sec.)
//	    queries:                             400    (3143.87 per sec.)
//	    ignored errors:                      0      (0.00 per sec.)
//	    reconnects:                          0      (0.00 per sec.)
//
//	General statistics:
//	    total time:                          0.1263s
//	    total number of events:              20
//
// It fails if the transactions or events line is missing.
func ParseSysbench(out string) (SysbenchResult, error) {
	var r SysbenchResult
	fields := map[string]*uint64{
		"read": &r.Read, "write": &r.Write, "other": &r.Other, "total": &r.Total,
		"transactions": &r.Transactions, "queries": &r.Queries,
		"ignored errors": &r.Errors, "reconnects": &r.Reconnects,
		"total number of events": &r.Events,
	}
	var haveTx, haveEvents bool
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		words := strings.Fields(rest)
		if !ok || len(words) == 0 {
			continue
		}
		var err error
		if p := fields[name]; p != nil {
			*p, err = strconv.ParseUint(words[0], 10, 64)
			haveTx = haveTx || name == "transactions"
			haveEvents = haveEvents || name == "total number of events"
		} else if name == "total time" {
			r.Time, err = time.ParseDuration(words[0]) // "1.6970s"
		}
		if err != nil {
			return r, fmt.Errorf("mysandbox: parsing sysbench line %q: %w", line, err)
		}
	}
	if !haveTx || !haveEvents {
		return r, fmt.Errorf("mysandbox: sysbench output has no transaction count or event count:\n%s", out)
	}
	return r, nil
}
