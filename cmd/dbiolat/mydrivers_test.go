package main

// MySQL's protocol as drivers speak it to MariaDB: PyMySQL (PyPI), MariaDB
// Connector/J and MySQL Connector/J (Maven Central), driven by the
// programs in testdata/drivers. Each case's statements are counted as the
// server counts them.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
)

func TestMySQLDriversStatementsCounted(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	port := 20000 + (os.Getpid()+29)%20000
	s := startMariaDBWith(t, mysandbox.Options{Port: port, Settings: map[string]string{"general_log": "ON", "log_output": "TABLE"}})
	ctx := mysqlContext(t)
	addDriverUser(t, s)
	cases := []driverCase{
		{"pymysql", "executemany", regexp.MustCompile(`drv_executemany\b`)},
		{"pymysql", "multi", regexp.MustCompile(`drv_multi\b`)},
		{"pymysql", "unbuffered", regexp.MustCompile(`drv_unbuffered\b`)},
		{"pymysql", "loaddata", regexp.MustCompile(`drv_loaddata\b`)},
		{"connectorj", "bulk", regexp.MustCompile(`drv_bulk\b`)},
		{"connectorj", "pipelined", regexp.MustCompile(`drv_pipelined\b`)},
		{"connectorj", "prepared", regexp.MustCompile(`drv_prepared\b`)},
		{"connectorj", "longdata", regexp.MustCompile(`drv_longdata\b`)},
		{"mysql-connectorj", "cursor", regexp.MustCompile(`drv_cursor\b`)},
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	for _, dc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var cmd *exec.Cmd
		switch dc.driver {
		case "pymysql":
			cmd = exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "my_pymysql.py"), s.Socket, dc.name)
		case "connectorj":
			url := fmt.Sprintf("jdbc:mariadb://127.0.0.1:%d/test?user=drv&password=drv", port)
			cmd = exec.CommandContext(ctx, "java", "-cp", jars.mariadb, filepath.Join("testdata", "drivers", "MyJdbc.java"), url, dc.name)
		case "mysql-connectorj":
			url := fmt.Sprintf("jdbc:mysql://127.0.0.1:%d/test?user=drv&password=drv&useCursorFetch=true", port)
			cmd = exec.CommandContext(ctx, "java", "-cp", jars.mysql, filepath.Join("testdata", "drivers", "MyJdbc.java"), url, dc.name)
		}
		_, err := cmdrun.Run(cmd, nil, dc.driver)
		cancel()
		if err != nil {
			t.Fatalf("%s %s: %v", dc.driver, dc.name, err)
		}
	}
	queries, _, sum := tr.stop(t)
	// performance_schema counts each statement a text command ran (a
	// multi-statement one's each); MariaDB 10.11's digests leave out the
	// executions of prepared statements, which its general log lists.
	theirs := map[string]int{}
	count := func(query string) {
		out, err := s.SQL(ctx, "", query)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			calls, text, _ := strings.Cut(line, "\t")
			n, _ := strconv.Atoi(calls)
			for _, dc := range cases {
				if dc.marker.MatchString(text) {
					theirs[dc.name] += n
				}
			}
		}
	}
	count("SELECT COUNT_STAR, DIGEST_TEXT FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT LIKE '%drv\\_%'")
	count("SELECT 1, argument FROM mysql.general_log WHERE command_type = 'Execute'")
	for _, dc := range cases {
		ours, records := 0, 0
		for _, q := range queries {
			if dc.marker.MatchString(q.Query) {
				ours += q.Statements
				records++
			}
		}
		t.Logf("%-10s %-12s the server %4d, dbiolat %4d in %d records", dc.driver, dc.name, theirs[dc.name], ours, records)
		if ours != theirs[dc.name] || ours == 0 {
			t.Errorf("%s %s: dbiolat counted %d statements, the server %d", dc.driver, dc.name, ours, theirs[dc.name])
		}
	}
	// A cursor's fetches are records of their own, parts of its statement.
	fetches := comCounters(t, s)["com_stmt_fetch"]
	parts := uint64(0)
	for _, q := range queries {
		if q.Statements == 0 {
			parts++
		}
	}
	if parts != fetches || fetches == 0 {
		t.Errorf("%d records of parts of statements, the server ran %d COM_STMT_FETCH", parts, fetches)
	}
	checkConnectionTimeline(t, queries)
	checkRepliesEnded(t, sum)
}

// addDriverUser gives the drivers, which connect over TCP, their user
// drv (password drv) and its database test.
func addDriverUser(t *testing.T, s *mysandbox.Server) {
	t.Helper()
	if _, err := s.SQL(mysqlContext(t), "", "CREATE DATABASE IF NOT EXISTS test; CREATE USER drv@'127.0.0.1' IDENTIFIED BY 'drv'; GRANT ALL ON test.* TO drv@'127.0.0.1'"); err != nil {
		t.Fatal(err)
	}
}
