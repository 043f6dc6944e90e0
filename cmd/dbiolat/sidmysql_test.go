package main

// The MySQL family's newest servers, Debian sid's, from the project's
// roots, as their users run them: MySQL 9.7 (the mysql root) and MariaDB
// 11.8 (the mariadb root), in a container, over their unix socket and over
// TCP, where both negotiate TLS by default; MySQL's users authenticated by
// caching_sha2_password, its clients sending query attributes.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/cmdrun"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/sidroot"
)

// nodeModules is the project's node_modules, which holds mysql2.
func nodeModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".tools", "node", "node_modules"))
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "mysql2", "package.json"))
	}
	if err != nil {
		msg := fmt.Sprintf("mysql2 is not installed (%v): run scripts/install-deps", err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// sidMySQLs are the MySQL-family servers of the sid roots: their roots'
// names, and the settings the tests need of them (MariaDB's
// performance_schema is off by default).
var sidMySQLs = []struct {
	name, root string
	settings   []string
}{
	{"mysql9.7", "mysql", nil},
	{"mariadb11.8", "mariadb", []string{"--performance-schema=ON", "--general-log=ON", "--log-output=TABLE"}},
}

// Drivers against MySQL 9.7 and MariaDB 11.8 in a container, each case's
// statements counted as the server counts them: MySQL's statement digests
// (their executions of prepared statements included; not their PREPAREs
// and DEALLOCATEs, which run no statement, as pg_stat_statements counts no
// Parse); MariaDB's digests, which leave out executions, and its general
// log's. PyMySQL and mysql2 over the unix socket and over TLS, MySQL
// Connector/J over TLS (server-prepared statements, a batch, a cursor's
// fetches, a long parameter, and on MySQL query attributes), the client
// over the socket. Every TLS connection is read at the root's OpenSSL.
func TestSidMySQLDriversStatementsCounted(t *testing.T) {
	sideBySide(t)
	python, jars := driverTools(t)
	modules := nodeModules(t)
	for _, server := range sidMySQLs {
		t.Run(server.name, func(t *testing.T) {
			sideBySide(t)
			checkDriversCounted(t, python, jars, modules, server.root, server.settings)
		})
	}
}

func checkDriversCounted(t *testing.T, python string, jars driverJars, modules, root string, settings []string) {
	m, port := startSidMySQL(t, root, sidroot.Container, settings...)
	sql := sidSQL(t, m)
	sql("CREATE DATABASE IF NOT EXISTS test; SET GLOBAL local_infile = 1")
	if !m.MariaDB {
		sql(`INSTALL COMPONENT "file://component_query_attributes"`)
	}
	socket, tcp := m.HostPath(m.Dir+"/mysqld.sock"), fmt.Sprintf("127.0.0.1:%d", port)
	user := sidroot.MySQLUser

	type run struct {
		driver, name, transport string
		cmd                     func(ctx context.Context) *exec.Cmd
	}
	var runs []run
	for _, transport := range []string{"sock", "tls"} {
		target, login := socket, []string{"root", ""}
		if transport == "tls" {
			target, login = tcp, []string{user, user}
		}
		for _, name := range []string{"executemany", "multi", "unbuffered", "loaddata"} {
			runs = append(runs, run{"pymysql", name, transport, func(ctx context.Context) *exec.Cmd {
				return exec.CommandContext(ctx, python, filepath.Join("testdata", "drivers", "my_pymysql.py"), target, name, login[0], login[1])
			}})
		}
		for _, name := range []string{"query", "execute", "multi"} {
			runs = append(runs, run{"mysql2", name, transport, func(ctx context.Context) *exec.Cmd {
				cmd := exec.CommandContext(ctx, "node", filepath.Join("testdata", "drivers", "my_mysql2.js"), target, name, login[0], login[1])
				cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
				return cmd
			}})
		}
	}
	jdbc := []string{"bulk", "prepared", "longdata", "cursor", "attributes"}
	if m.MariaDB { // no query attributes
		jdbc = jdbc[:len(jdbc)-1]
	}
	for _, name := range jdbc {
		runs = append(runs, run{"connectorj", name, "tls", func(ctx context.Context) *exec.Cmd {
			url := fmt.Sprintf("jdbc:mysql://%s/test?user=%s&password=%[2]s&useCursorFetch=true&sslMode=REQUIRED", tcp, user)
			return exec.CommandContext(ctx, "java", "-cp", jars.mysql, filepath.Join("testdata", "drivers", "MyJdbc.java"), url, name)
		}})
	}
	table := func(r run) string { return "drv_" + r.name + "_" + r.transport } // each run's statements name it

	sql("TRUNCATE performance_schema.events_statements_summary_by_digest")
	fetched := func() int {
		_, n, _ := strings.Cut(sql("SHOW GLOBAL STATUS LIKE 'Com_stmt_fetch'"), "\t")
		return atoi(n)
	}
	fetchesBefore := fetched()
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(m.PID()))
	const clientRuns = 20
	// The client's session over the socket: MariaDB's client asks for TLS
	// there too, MySQL's does not; the session says which it got.
	script := strings.Builder{}
	script.WriteString("SHOW SESSION STATUS LIKE 'Ssl_cipher';\n")
	for i := range clientRuns {
		fmt.Fprintf(&script, "SELECT %d AS drv_client_sock;\n", i)
	}
	tlsConnections := 0
	if cipher, _, _ := strings.Cut(sql(script.String()), "\n"); strings.TrimPrefix(cipher, "Ssl_cipher\t") != "" {
		tlsConnections++
	}
	// Debian 12's MariaDB client (the MariaDB Connector/C sysbench links)
	// starting with mysql_native_password: MySQL 9.7 switches it to
	// caching_sha2_password, which it answers, for an empty password,
	// with an empty packet (a header alone, no payload to read).
	switched := exec.Command("mariadb", "--no-defaults", "--batch", "--skip-ssl", "--default-auth=mysql_native_password",
		"--user=root", "--socket="+socket, "test")
	script.Reset()
	for i := range clientRuns {
		fmt.Fprintf(&script, "SELECT %d AS drv_switched_sock;\n", i)
	}
	switched.Stdin = strings.NewReader(script.String())
	if _, err := cmdrun.Run(switched, nil, "mariadb"); err != nil {
		t.Fatalf("Debian's mariadb client: %v", err)
	}
	for _, r := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := r.cmd(ctx)
		cmd.Env = append(cmd.Environ(), "DRV_SUFFIX=_"+r.transport)
		_, err := cmdrun.Run(cmd, nil, r.driver)
		cancel()
		if err != nil {
			t.Fatalf("%s %s over %s: %v", r.driver, r.name, r.transport, err)
		}
		if r.transport == "tls" {
			tlsConnections++
		}
	}
	queries, _, sum := tr.stop(t)

	theirs := map[string]int{}
	counted := sql("SELECT COUNT_STAR, DIGEST_TEXT FROM performance_schema.events_statements_summary_by_digest " +
		`WHERE DIGEST_TEXT LIKE '%drv\_%' AND DIGEST_TEXT NOT LIKE 'PREPARE %' AND DIGEST_TEXT NOT LIKE 'DEALLOCATE %'`)
	if m.MariaDB {
		counted += "\n" + sql(`SELECT 1, argument FROM mysql.general_log WHERE command_type = 'Execute' AND argument LIKE '%drv\_%'`)
	}
	for _, line := range strings.Split(counted, "\n") {
		calls, text, _ := strings.Cut(line, "\t")
		if m := regexp.MustCompile(`\bdrv_\w+`).FindString(text); m != "" {
			theirs[m] += atoi(calls)
		}
	}
	count := func(table string) (statements, records int) {
		re := regexp.MustCompile(`\b` + table + `\b`)
		for _, q := range queries {
			if re.MatchString(q.Query) {
				statements += q.Statements
				records++
			}
		}
		return statements, records
	}
	for _, client := range []string{"drv_client_sock", "drv_switched_sock"} {
		ours, records := count(client)
		t.Logf("%-10s %-11s %-4s the server %4d, dbiolat %4d in %d records", "mysql", client, "sock", theirs[client], ours, records)
		if ours != clientRuns || theirs[client] != clientRuns {
			t.Errorf("the client's %d statements (%s): the server counted %d, dbiolat %d", clientRuns, client, theirs[client], ours)
		}
	}
	for _, r := range runs {
		ours, records := count(table(r))
		want := theirs[table(r)]
		t.Logf("%-10s %-11s %-4s the server %4d, dbiolat %4d in %d records", r.driver, r.name, r.transport, want, ours, records)
		if ours != want || ours == 0 {
			t.Errorf("%s %s over %s: dbiolat counted %d statements, the server %d", r.driver, r.name, r.transport, ours, want)
		}
	}
	// A cursor's fetches are records of their own, parts of its statement.
	fetches, parts := fetched()-fetchesBefore, 0
	for _, q := range queries {
		if q.Statements == 0 {
			parts++
		}
	}
	if parts != fetches || fetches == 0 {
		t.Errorf("%d records of parts of statements, the server ran %d COM_STMT_FETCH", parts, fetches)
	}
	t.Logf("wire_tls %d for %d connections over TLS; %d fetches", sum.Drops.Of("wire_tls"), tlsConnections, fetches)
	if got := sum.Drops.Of("wire_tls"); got != uint64(tlsConnections) {
		t.Errorf("%d connections read at OpenSSL, want the %d over TLS", got, tlsConnections)
	}
	checkNoWarning(t, tr.stderr.String())
	checkNoWireLoss(t, sum)
	checkConnectionTimeline(t, queries)
	checkRepliesEnded(t, sum)
}

// sysbench's oltp_read_write, its statements prepared and not, on MySQL
// 9.7 and MariaDB 11.8 in a container, and on MariaDB 11.8 with its thread
// pool (a connection's commands on any worker, a COMMIT's reply maybe sent
// by another): every statement one record, counted by kind as the
// server's Com_ counters count them (TestMySQLStatementsOnce's check).
func TestSidMySQLStatementsOnce(t *testing.T) {
	for _, c := range []struct {
		name, root string
		settings   []string
	}{
		{"mysql9.7", "mysql", nil},
		{"mariadb11.8", "mariadb", nil},
		{"mariadb11.8-thread-pool", "mariadb", []string{"--thread-handling=pool-of-threads", "--thread-pool-size=2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := startSidMySQL(t, c.root, sidroot.Container, c.settings...)
			qs, _, before, after := sysbenchRun(t, m, "")
			checkStatementsOnce(t, qs, before, after)
		})
	}
}

// TestMySQLKnownResultsEnded's check on MySQL 9.7 (its client asks for
// CLIENT_DEPRECATE_EOF, an OK in place of each EOF, and for
// CLIENT_QUERY_ATTRIBUTES, two bytes before each text: counted by the
// text after them) and MariaDB 11.8 in a container.
func TestSidMySQLKnownResultsEnded(t *testing.T) {
	sideBySide(t)
	for _, server := range sidMySQLs {
		t.Run(server.name, func(t *testing.T) {
			m, _ := startSidMySQL(t, server.root, sidroot.Container, server.settings...)
			checkKnownResultsEnded(t, m.PID(), m.Client)
		})
	}
}

// A row lock and a metadata lock another session holds, on MySQL 9.7 and
// MariaDB 11.8 in a container: each blocked statement's wait is in its
// lock box, named as the server names it (thd_wait_begin's type, which
// MySQL exports as a C++ function), within 5% of what performance_schema
// timed: for the row lock the statement's LOCK_TIME on MySQL (which counts
// row lock waits since 8.0.28), its whole time on MariaDB; for the
// metadata lock the wait/lock/metadata/sql/mdl waits nested in the
// statement (LOCK_TIME leaves them out).
func TestSidMySQLLockWaitsNamed(t *testing.T) {
	sideBySide(t)
	for _, server := range sidMySQLs {
		t.Run(server.name, func(t *testing.T) {
			sideBySide(t)
			checkLockWaits(t, server.root, server.settings)
		})
	}
}

func checkLockWaits(t *testing.T, root string, settings []string) {
	m, _ := startSidMySQL(t, root, sidroot.Container, settings...)
	sql := sidSQL(t, m)
	sql(`CREATE DATABASE locks; CREATE TABLE locks.t (id INT PRIMARY KEY, v INT); INSERT INTO locks.t VALUES (1, 0);
UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'
 WHERE NAME IN ('events_statements_current', 'events_statements_history_long', 'events_waits_current', 'events_waits_history_long');
UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'`)

	// blockedBy runs blocked while holder (a session that takes a lock
	// with its first statement, prints its first row, then sleeps two
	// seconds in its transaction) holds the lock.
	blockedBy := func(holder, blocked string) {
		t.Helper()
		cmd := m.Client(mysqlContext(t), "--unbuffered", "locks", "-e", "BEGIN; "+holder+"; SELECT SLEEP(2); COMMIT")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !bufio.NewScanner(out).Scan() { // its first row: the lock is held
			t.Fatalf("%q took no lock: %s", holder, stderr.String())
		}
		go io.Copy(io.Discard, out)
		sql("USE locks; " + blocked)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%q: %v: %s", holder, err, stderr.String())
		}
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(m.PID()))
	update, alter := "UPDATE t SET v = v + 1 WHERE id = 1", "ALTER TABLE t ADD COLUMN w INT"
	blockedBy("SELECT v FROM t WHERE id = 1 FOR UPDATE", update)
	blockedBy("SELECT id FROM t", alter)
	qs, _, _ := tr.stop(t)
	checkBoxesAddUp(t, qs)

	// performance_schema's times are in picoseconds. MariaDB's LOCK_TIME
	// leaves row lock waits out: there the row lock's reference is the
	// statement's whole time, which the wait is nearly all of.
	psNs := func(q string) uint64 { return uint64(atoi(sql(q))) / 1000 }
	rowLock := psNs("SELECT LOCK_TIME FROM performance_schema.events_statements_history_long WHERE SQL_TEXT = '" + update + "'")
	if m.MariaDB {
		rowLock = psNs("SELECT TIMER_WAIT FROM performance_schema.events_statements_history_long WHERE SQL_TEXT = '" + update + "'")
	}
	mdl := psNs(`SELECT COALESCE(SUM(w.TIMER_WAIT), 0) FROM performance_schema.events_waits_history_long w
 JOIN performance_schema.events_statements_history_long s ON w.THREAD_ID = s.THREAD_ID AND w.NESTING_EVENT_ID = s.EVENT_ID
 WHERE s.SQL_TEXT = '` + alter + `' AND w.EVENT_NAME = 'wait/lock/metadata/sql/mdl'`)
	for _, c := range []struct {
		query, wait string
		theirs      uint64
	}{
		{"UPDATE t SET v = v + ? WHERE id = ?", "Lock/RowLock", rowLock},
		{"ALTER TABLE t ADD COLUMN w INT", "Lock/MetadataLock", mdl},
	} {
		q := only(t, qs, c.query, 1)[0]
		t.Logf("%s: %v, lock %v, waits %v; performance_schema %v", c.query, time.Duration(q.QueryNs), time.Duration(q.LockNs),
			q.Waits, time.Duration(c.theirs))
		// The holder kept the lock about two seconds after the blocked
		// statement began: half a second is a wait beyond doubt.
		if c.theirs < uint64(500*time.Millisecond) {
			t.Errorf("%s: performance_schema timed a wait of %v: the lock was not held", c.query, time.Duration(c.theirs))
		}
		if diff := max(q.LockNs, c.theirs) - min(q.LockNs, c.theirs); diff > c.theirs/20 {
			t.Errorf("%s: lock %v, performance_schema %v: more than 5%% apart", c.query, time.Duration(q.LockNs), time.Duration(c.theirs))
		}
		if q.Waits[c.wait] < q.LockNs*9/10 {
			t.Errorf("%s: waits %v, want 90%% of the lock box %v named %s", c.query, q.Waits, time.Duration(q.LockNs), c.wait)
		}
	}
}

// A cold full scan of a table four times the buffer pool, its pages read
// with O_DIRECT (both servers' default: each a block request), on MySQL
// 9.7 and MariaDB 11.8. Chrooted, InnoDB submits its read-ahead
// asynchronously from the query's own thread (MySQL: Linux native AIO;
// MariaDB: io_uring or native AIO); in a container, where io_setup is
// refused, MySQL's read I/O threads perform it (simulated AIO: aio.bpf.c).
// Either way the bytes the query's pages took to read are the query's:
// its block bytes within 5% of the bytes performance_schema says the
// table's file read, most of the table.
func TestSidMySQLColdScan(t *testing.T) {
	sideBySide(t)
	for _, server := range sidMySQLs {
		for _, how := range []sidroot.How{sidroot.Chroot, sidroot.Container} {
			t.Run(server.name+"/"+how.String(), func(t *testing.T) {
				checkColdScan(t, server.root, how, append([]string{"--innodb-buffer-pool-size=32M"}, server.settings...))
			})
		}
	}
}

func checkColdScan(t *testing.T, root string, how sidroot.How, settings []string) {
	m, _ := startSidMySQL(t, root, how, settings...)
	sql := sidSQL(t, m)
	rows := "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 400000) SELECT REPEAT('x', 255) FROM s"
	if m.MariaDB {
		rows = "SELECT REPEAT('x', 255) FROM scan.seq_1_to_400000" // MariaDB's sequence engine
	} else {
		sql("SET GLOBAL cte_max_recursion_depth = 400000")
	}
	sql("CREATE DATABASE scan; CREATE TABLE scan.big (id INT PRIMARY KEY AUTO_INCREMENT, pad CHAR(255)); INSERT INTO scan.big (pad) " + rows)
	file, err := os.Stat(m.HostPath(m.Dir + "/data/scan/big.ibd"))
	if err != nil {
		t.Fatal(err)
	}
	read := func() uint64 {
		return uint64(atoi(sql(`SELECT SUM_NUMBER_OF_BYTES_READ FROM performance_schema.file_summary_by_instance
 WHERE FILE_NAME LIKE '%/scan/big.ibd'`)))
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", strconv.Itoa(m.PID()))
	before := read()
	sql("SELECT SUM(LENGTH(pad)) FROM scan.big")
	theirs := read() - before
	qs, _, _ := tr.stop(t)
	scan := only(t, qs, "SELECT SUM(LENGTH(pad)) FROM scan.big", 1)[0]
	t.Logf("the table %d MiB, performance_schema read %d MiB of it; the scan %v: %d block requests of %d MiB, "+
		"%d reads of %d MiB by I/O threads; cpu %v, runq %v, io wait %v, aio wait %v, other wait %v, waits %v",
		file.Size()>>20, theirs>>20, time.Duration(scan.QueryNs), scan.BlkCount, scan.BlkBytes>>20, scan.AIOReadCount,
		scan.AIOReadBytes>>20, time.Duration(scan.CPUNs), time.Duration(scan.RunqNs), time.Duration(scan.IOWaitNs),
		time.Duration(scan.AIOWaitNs), time.Duration(scan.OtherWaitNs), scan.Waits)
	if theirs < uint64(file.Size())/2 {
		t.Errorf("performance_schema says %d of the table's %d bytes were read: the scan was not cold", theirs, file.Size())
	}
	if diff := max(scan.BlkBytes, theirs) - min(scan.BlkBytes, theirs); diff > theirs/20 {
		t.Errorf("the scan's block requests read %d bytes, performance_schema %d: more than 5%% apart", scan.BlkBytes, theirs)
	}
	// MySQL in the container: its I/O threads read nearly all of it (the
	// query itself the pages read-ahead had not queued), and the query
	// slept on them in the aio wait box, not among other waits.
	simulated := !m.MariaDB && how == sidroot.Container
	if simulated && (scan.AIOReadBytes < theirs*9/10 || scan.AIOReadBytes > theirs || scan.AIOWaitNs <= scan.OtherWaitNs) {
		t.Errorf("InnoDB's I/O threads read %d bytes for the scan (of %d), and it waited %v for them, %v for other things",
			scan.AIOReadBytes, theirs, time.Duration(scan.AIOWaitNs), time.Duration(scan.OtherWaitNs))
	}
	// Submitted from the query's thread, the reads are its own; MySQL's I/O
	// threads finish the odd one synchronously (7 of 6,738 reads once).
	if !simulated && scan.AIOReadBytes > theirs/10 {
		t.Errorf("reads submitted by the query's thread, yet %d bytes of %d read by I/O threads for it", scan.AIOReadBytes, theirs)
	}
}

// MySQL 9.7 names its threads: each thread's role, told from its name, is
// the one performance_schema.threads names it by, for every thread it
// lists (a connection waiting in SLEEP among them). Chrooted: its thread
// ids are ours.
func TestSidMySQLThreadRoles(t *testing.T) {
	m, _ := startSidMySQL(t, "mysql", sidroot.Chroot)
	sql := sidSQL(t, m)
	sleeper := m.Client(mysqlContext(t), "-e", "SELECT SLEEP(30)")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	var rows string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(rows, "one_connection") && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		rows = sql("SELECT THREAD_OS_ID, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL AND PROCESSLIST_ID IS NULL OR PROCESSLIST_INFO LIKE 'SELECT SLEEP%'")
	}
	want := func(name string) string {
		switch {
		case name == "thread/sql/main":
			return mysql.RoleServer
		case name == "thread/sql/one_connection":
			return mysql.RoleConnection
		case strings.HasPrefix(name, "thread/innodb/page_flush"):
			return mysql.RolePageCleaner
		case strings.HasPrefix(name, "thread/innodb/io_"):
			return mysql.RoleInnoDBAIO
		case strings.HasPrefix(name, "thread/innodb/"):
			return mysql.RoleInnoDBTask
		}
		return mysql.RoleBackground
	}
	in, err := mysql.ByPID(m.PID())
	if err != nil {
		t.Fatal(err)
	}
	threads, err := mysql.NewThreads(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, row := range strings.Split(rows, "\n") {
		id, name, _ := strings.Cut(row, "\t")
		role, ok := threads.ThreadRole(atoi(id))
		if !ok || role != want(name) {
			t.Errorf("thread %s (%s in performance_schema): role %q (%v), want %q", id, name, role, ok, want(name))
		}
		got[role]++
	}
	t.Logf("roles of the %d threads performance_schema lists: %v", len(strings.Split(rows, "\n")), got)
	for _, r := range []string{mysql.RoleServer, mysql.RoleConnection, mysql.RolePageCleaner, mysql.RoleInnoDBTask, mysql.RoleInnoDBAIO} {
		if got[r] == 0 {
			t.Errorf("no thread has the role %q: %v", r, got)
		}
	}
}
