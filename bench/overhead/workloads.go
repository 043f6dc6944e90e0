package main

// The workloads: pgbench's on PostgreSQL, sysbench's on MariaDB and
// MySQL. The select-tls workload is select-only over TLS on loopback TCP,
// as clients that encrypt reach a server: its cost lies in the uprobes on
// the TLS library's SSL_read and SSL_write, the plaintext's only readers,
// which every process mapping the library hits (pgbench too).

import (
	"context"
	"fmt"
	"strings"

	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/sandbox"
)

// sysbenchTest is the sysbench test standing for a pgbench workload on MariaDB and MySQL.
var sysbenchTest = map[string]string{"select-only": "oltp_read_only", "tpcb-like": "oltp_read_write"}

// sysbenchTables is the data sysbench runs on: 4 tables of 10,000 rows
// (about 10 MB), held by the server's buffer pool as pgbench's scale 5 is
// by shared buffers.
const sysbenchTables, sysbenchRows = 4, 10000

// load runs the workload once, for secs: transactions and their rate.
func (e *env) load(ctx context.Context, workload, wflag string, clients, secs int) (tx int64, tps float64, err error) {
	if e.mysql != nil {
		test, ok := sysbenchTest[workload]
		if !ok {
			return 0, 0, fmt.Errorf("the %s workload is PostgreSQL's only", workload)
		}
		res, err := e.mysql.Sysbench(ctx, mysandbox.SysbenchOptions{Test: test, Tables: sysbenchTables,
			TableSize: sysbenchRows, Threads: clients, Time: secs}, "run")
		if err != nil || res.Transactions == 0 || res.Time <= 0 {
			return 0, 0, fmt.Errorf("sysbench: %v", err)
		}
		return int64(res.Transactions), float64(res.Transactions) / res.Time.Seconds(), nil
	}
	args := []string{"-n", "-c", fmt.Sprint(clients), "-T", fmt.Sprint(secs)}
	args = append(args, strings.Fields(wflag)...)
	var out string
	if overTLS[workload] {
		out, err = pgbenchOverTLS(ctx, e.cluster, args)
	} else {
		out, err = e.cluster.Pgbench(ctx, "postgres", args...)
	}
	if err != nil {
		return 0, 0, err
	}
	res, err := pgsandbox.ParsePgbench(out)
	if err != nil || res.Transactions == 0 {
		return 0, 0, fmt.Errorf("pgbench: %v", err)
	}
	return int64(res.Transactions), res.TPS, nil
}

// overTLS are the workloads whose clients connect over TLS.
var overTLS = map[string]bool{"select-tls": true}

// tlsSettings are the server settings a TLS workload needs: a loopback
// TCP port (a unix socket has no TLS).
func tlsSettings() (map[string]string, error) {
	port, err := sandbox.FreePort()
	if err != nil {
		return nil, err
	}
	return map[string]string{"listen_addresses": "127.0.0.1", "port": fmt.Sprint(port)}, nil
}

// pgbenchOverTLS runs pgbench with args against the server's TCP port,
// TLS required.
func pgbenchOverTLS(ctx context.Context, c *pgsandbox.Cluster, args []string) (string, error) {
	cmd := c.PgbenchCmd(ctx, "postgres", append([]string{"-h", "127.0.0.1"}, args...)...)
	// HOME: libpq looks for a client certificate there, which the
	// server's user may not read in root's home.
	cmd.Env = append(cmd.Env, "PGSSLMODE=require", "HOME="+c.SocketDir())
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pgbench over TLS: %w", err)
	}
	return string(out), nil
}
