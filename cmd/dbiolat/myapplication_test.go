package main

// Who sent each query, on MariaDB: the program_name connection attribute
// of the handshake, as PyMySQL (program_name=), MariaDB Connector/J
// (connectionAttributes=program_name:NAME) and the mariadb client (over
// TLS) send it. Each application's queries are counted against what it
// sent, and together against the server's statement digests; the server's
// own view of the client's attribute (performance_schema) names the
// mariadb client's.

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
)

func TestMySQLApplicationNamed(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	port := freePort(t)
	s := startMariaDBWith(t, mysandbox.Options{Port: port, Settings: writeTLSFiles(t, t.TempDir())})
	ctx := mysqlContext(t)
	addDriverUser(t, s)
	early := openMariaDBSession(t, s) // its handshake is not seen: no application
	if _, err := s.SQL(ctx, "", "TRUNCATE performance_schema.events_statements_summary_by_digest"); err != nil {
		t.Fatal(err)
	}

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	sent := map[string]int{"shop-py": 30, "shop-j": 20, "": 1}
	for _, run := range []string{"pymysql", "connectorj"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "my_application.py"), s.Socket, "shop-py", "30")
		if run == "connectorj" {
			url := fmt.Sprintf("jdbc:mariadb://127.0.0.1:%d/test?user=drv&password=drv&connectionAttributes=program_name:shop-j", port)
			cmd = exec.CommandContext(ctx, "java", "-cp", jars.mariadb, filepath.Join("testdata", "drivers", "MyJdbc.java"), url, "application")
		}
		_, err := cmdrun.Run(cmd, nil, run)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
	}
	// The mariadb client, over TLS: the server says what it named itself.
	out, err := s.SQL(ctx, "", "SELECT ATTR_VALUE FROM performance_schema.session_connect_attrs WHERE PROCESSLIST_ID = CONNECTION_ID() AND ATTR_NAME = 'program_name';"+
		"SELECT VARIABLE_VALUE <> '' FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher';"+
		strings.Repeat("SELECT 5 AS app_probe;", 5))
	lines := strings.Split(out, "\n")
	if err != nil || len(lines) != 7 || lines[0] == "" || lines[1] != "1" {
		t.Fatalf("the mariadb client's program name and TLS: %q, %v", out, err)
	}
	sent[lines[0]] += 5
	early.run(t, "SELECT 9 AS app_probe")
	queries, _, _ := tr.stop(t)

	ours, total := map[string]int{}, 0
	for _, q := range queries {
		if strings.Contains(q.Query, "app_probe") {
			ours[q.Application] += q.Statements
			total += q.Statements
		}
	}
	for _, app := range slices.Sorted(maps.Keys(sent)) {
		t.Logf("%-8q sent %3d, dbiolat %3d", app, sent[app], ours[app])
		if ours[app] != sent[app] {
			t.Errorf("application %q: dbiolat counted %d queries, it sent %d", app, ours[app], sent[app])
		}
	}
	if len(ours) != len(sent) {
		t.Errorf("queries by application %v, want exactly %v", ours, sent)
	}
	out, err = s.SQL(ctx, "", "SELECT SUM(COUNT_STAR) FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT LIKE '%app\\_probe%'")
	if theirs, _ := strconv.Atoi(out); err != nil || theirs != total {
		t.Errorf("the server's digests counted %q (%v), dbiolat %d across applications", out, err, total)
	}
}
