package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/mysql"
	"github.com/dbiolat/dbiolat/internal/sidroot"
	"github.com/dbiolat/dbiolat/internal/testenv"
	"github.com/dbiolat/dbiolat/internal/top"
)

// MySQL and MariaDB: the same records from MySQL's protocol, checked
// against the server's own counts. A real MariaDB (Debian's 10.11) runs in
// a temp directory on a unix socket; sysbench drives it.

// startMariaDB starts a throwaway MariaDB for one test.
func startMariaDB(t *testing.T, settings map[string]string) *mysandbox.Server {
	t.Helper()
	return startMariaDBWith(t, mysandbox.Options{Settings: settings})
}

// startMariaDBWith starts one with more options (a TCP port).
func startMariaDBWith(t *testing.T, o mysandbox.Options) *mysandbox.Server {
	t.Helper()
	testenv.NeedRoot(t)
	s, err := mysandbox.Start(o)
	if errors.Is(err, mysandbox.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func mysqlContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// mysqlUnderTest is a MySQL-family server a test loads with sysbench:
// Debian's MariaDB (mysandbox) or a server of a sid root (sidroot).
type mysqlUnderTest interface {
	PID() int
	Sysbench(ctx context.Context, o mysandbox.SysbenchOptions, phase string) (mysandbox.SysbenchResult, error)
}

// comCounters reads the server's statement counters (SHOW GLOBAL STATUS
// LIKE 'Com_%'), and the TLS handshakes it accepted (Ssl_accepts); the
// reading itself counts in Com_show_status, and with MySQL's client in
// Com_select too.
func comCounters(t *testing.T, s mysqlUnderTest) map[string]uint64 {
	t.Helper()
	const status = "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Com\\_%' OR Variable_name = 'Ssl_accepts'"
	var out string
	var err error
	switch s := s.(type) {
	case *mysandbox.Server:
		out, err = s.SQL(mysqlContext(t), "", status)
	case *sidroot.MySQL:
		out, err = s.SQL(mysqlContext(t), status)
	}
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		if name, v, ok := strings.Cut(line, "\t"); ok {
			m[strings.ToLower(name)], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return m
}

// The statement kinds sysbench's oltp_read_write runs, by the counter the
// server counts each in (a prepared statement's execution counts under its
// statement's kind too).
var sysbenchKinds = map[string]string{
	"SELECT": "com_select", "INSERT": "com_insert", "UPDATE": "com_update", "DELETE": "com_delete",
	"BEGIN": "com_begin", "COMMIT": "com_commit",
}

// sysbenchRun runs oltp_read_write for a fixed number of events in each
// prepared-statement mode while slowlog traces s (over TLS with the
// client files in tlsDir, writeTLSFiles), and returns the queries and the
// summary with the server's counters before and after.
func sysbenchRun(t *testing.T, s mysqlUnderTest, tlsDir string) (qs []model.Query, sum model.Summary, before, after map[string]uint64) {
	t.Helper()
	ctx := mysqlContext(t)
	o := mysandbox.SysbenchOptions{Test: "oltp_read_write", Tables: 2, TableSize: 2000, Threads: 4, Events: 200, TLSDir: tlsDir}
	if _, err := s.Sysbench(ctx, o, "prepare"); err != nil {
		t.Fatal(err)
	}
	before = comCounters(t, s)
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	for _, mode := range []string{"auto", "disable"} {
		o.PSMode = mode
		if _, err := s.Sysbench(ctx, o, "run"); err != nil {
			t.Fatal(err)
		}
	}
	qs, _, sum = tr.stop(t)
	after = comCounters(t, s)
	// MySQL's client runs SELECT @@version_comment as it connects: the
	// reading counted its own (a second reading says how many).
	after["com_select"] -= comCounters(t, s)["com_select"] - after["com_select"]
	checkBoxesAddUp(t, qs)
	checkRepliesEnded(t, sum)
	return qs, sum, before, after
}

// checkRepliesEnded: the end of every reply was recognized where it was
// sent (mysql.bpf.c), none only at the connection's next command.
func checkRepliesEnded(t *testing.T, sum model.Summary) {
	t.Helper()
	if n := sum.Drops["mysql_reply_unseen"]; n != 0 {
		t.Errorf("%d replies' ends were not recognized", n)
	}
}

// Every statement sysbench ran is one record, counted as the server counts
// them, by kind; a prepared statement's executions show its text.
func checkStatementsOnce(t *testing.T, qs []model.Query, before, after map[string]uint64) {
	t.Helper()
	got := map[string]uint64{}
	conns := map[uint32]bool{}
	for _, q := range qs {
		if q.Role != "connection" || q.User != "root" || q.Database != "sbtest" {
			t.Errorf("a query's role, user or database is not the connection's: %+v", q)
		}
		if strings.Contains(q.Query, "prepared before the trace") {
			t.Errorf("an execution's statement was not resolved: %q", q.Query)
		}
		kind, _, _ := strings.Cut(q.Query, " ")
		counter, ok := sysbenchKinds[kind]
		if !ok {
			t.Errorf("a statement sysbench does not run: %q", q.Query)
			continue
		}
		got[counter]++
		conns[q.ConnectionID] = true
		if q.ConnectionID == 0 || q.TID == 0 {
			t.Errorf("no connection id or thread: %+v", q)
		}
	}
	for _, counter := range sysbenchKinds {
		if want := after[counter] - before[counter]; got[counter] != want {
			t.Errorf("%s: %d records, the server counted %d", counter, got[counter], want)
		}
	}
	// auto prepares (each execution a COM_STMT_EXECUTE), disable does not.
	executes := after["com_stmt_execute"] - before["com_stmt_execute"]
	if executes == 0 || executes >= uint64(len(qs)) {
		t.Errorf("%d executions of prepared statements among %d statements: both modes should have run", executes, len(qs))
	}
	if len(conns) != 8 { // 4 threads in each of the two runs
		t.Errorf("%d connections, want 8", len(conns))
	}
	t.Logf("%d statements on %d connections, %d of them executions of prepared statements; by kind %v", len(qs), len(conns), executes, got)
}

func TestMySQLStatementsOnce(t *testing.T) {
	s := startMariaDB(t, nil)
	qs, _, before, after := sysbenchRun(t, s, "")
	checkStatementsOnce(t, qs, before, after)
}

// MariaDB's thread pool runs a connection's commands on any of its worker
// threads: the same statements, counted the same.
func TestMySQLThreadPool(t *testing.T) {
	s := startMariaDB(t, map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": "2"})
	qs, _, before, after := sysbenchRun(t, s, "")
	checkStatementsOnce(t, qs, before, after)
	threads, elsewhere := map[int]bool{}, 0
	for _, q := range qs {
		threads[q.TID] = true
		if q.AIOWaitNs > 0 { // its reply sent by another thread (mysql_handoff.bpf.h, mysql_parked)
			elsewhere++
		}
	}
	t.Logf("%d worker threads ran them; %d replies were sent by another thread than the one that ran the statement", len(threads), elsewhere)
}

// TLS connections are read in plaintext at the OpenSSL the server maps
// (libssl.so.3 in Debian's MariaDB): sysbench over TLS, every statement
// once, as the server counted them; every TLS handshake the server
// accepted while traced is a connection read so (wire_tls), none unread.
// A TLS session opened before the trace is read from its next statement.
func TestMySQLTLS(t *testing.T) {
	sideBySide(t)
	dir := t.TempDir()
	s := startMariaDBWith(t, mysandbox.Options{Port: freePort(t), Settings: writeTLSFiles(t, dir)})
	early := openMariaDBSession(t, s)
	qs, sum, before, after := sysbenchRun(t, s, dir)
	checkStatementsOnce(t, qs, before, after)
	// The mariadb client uses TLS on the socket too, when the server
	// offers it: the handshake of the connection that read the counters
	// after the run is counted in them, after the trace.
	accepted := after["ssl_accepts"] - before["ssl_accepts"] - 1
	read, unread := sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted")
	t.Logf("%d TLS handshakes accepted while traced, %d TLS connections read at OpenSSL, %d unread", accepted, read, unread)
	if accepted < 8 || read != accepted || unread != 0 {
		t.Errorf("the server accepted %d TLS handshakes (want at least sysbench's 8); %d connections read at OpenSSL (want as many), %d unread (want 0)",
			accepted, read, unread)
	}

	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	early.run(t, "SELECT 4242 AS from_before_the_trace")
	if _, err := s.SQL(mysqlContext(t), "", "SELECT 4343 AS new_over_tls"); err != nil {
		t.Fatal(err)
	}
	qs, _, sum = tr.stop(t)
	if len(matching(qs, "SELECT ? AS from_before_the_trace")) != 1 || len(matching(qs, "SELECT ? AS new_over_tls")) != 1 {
		t.Errorf("the TLS session older than the trace, or a new one, was not seen once: %+v", qs)
	}
	if sum.Drops.Of("wire_tls") != 2 || sum.Drops.Of("wire_encrypted") != 0 {
		t.Errorf("%d TLS connections read at OpenSSL (want 2: the older one, the new one), %d unread (want 0)",
			sum.Drops.Of("wire_tls"), sum.Drops.Of("wire_encrypted"))
	}
}

// mariadbSession is a mariadb client kept open: its statements run on one
// connection.
type mariadbSession struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

// openMariaDBSession connects a mariadb client to s (over TLS when the
// server offers it) and checks that it did.
func openMariaDBSession(t *testing.T, s *mysandbox.Server) *mariadbSession {
	t.Helper()
	in, out := startClient(t, exec.Command("mariadb", append(s.ClientArgs(), "--batch", "--skip-column-names", "--unbuffered")...))
	m := &mariadbSession{in: in, out: bufio.NewScanner(out)}
	if cipher := m.run(t, "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'"); cipher == "" {
		t.Fatal("the session is not over TLS")
	}
	return m
}

// run runs a statement that returns one row, its first line.
func (m *mariadbSession) run(t *testing.T, query string) string {
	t.Helper()
	if _, err := fmt.Fprintln(m.in, query+";"); err != nil {
		t.Fatal(err)
	}
	if !m.out.Scan() {
		t.Fatalf("%s: no answer: %v", query, m.out.Err())
	}
	return m.out.Text()
}

// writeTLSFiles writes a throwaway CA, and a server and a client
// certificate it signed with their keys, into dir, by the names sysbench
// 1.0 reads (mysandbox.SysbenchOptions.TLSDir): the server's settings
// that name its files.
func writeTLSFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dbiolat test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cacert.pem", "CERTIFICATE", caDER)
	for i, side := range []string{"server", "client"} {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: "127.0.0.1"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(side+"-cert.pem", "CERTIFICATE", der)
		write(side+"-key.pem", "PRIVATE KEY", keyDER)
	}
	return map[string]string{"ssl_ca": filepath.Join(dir, "cacert.pem"), "ssl_cert": filepath.Join(dir, "server-cert.pem"),
		"ssl_key": filepath.Join(dir, "server-key.pem")}
}

// record → report on MariaDB: every statement in the recording, the
// report names the server and its statements.
func TestMySQLRecordThenReport(t *testing.T) {
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	o := mysandbox.SysbenchOptions{Test: "oltp_read_write", Tables: 1, TableSize: 1000, Threads: 2, Events: 50}
	if _, err := s.Sysbench(ctx, o, "prepare"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "run.dbiolat")
	tr := startTrace(t, "record", "-o", file, "--pid", fmt.Sprint(s.PID()))
	res, err := s.Sysbench(ctx, o, "run")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("record: %v: %s", err, tr.stderr.String())
	}
	r := openRecording(t, file)
	if n := countQueries(t, r); uint64(n) != res.Total+res.Errors {
		t.Errorf("the recording holds %d statements, sysbench ran %d (%d of them failed)", n, res.Total+res.Errors, res.Errors)
	}
	out, err := exec.Command(binary, "report", file).CombinedOutput()
	for _, want := range []string{"(MariaDB 10.", "SELECT c FROM sbtest1 WHERE id=?", "COMMIT", "nothing dropped"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q: %v\n%s", want, err, out)
		}
	}
	// A recording compared with itself: every statement in both, unchanged.
	out, err = exec.Command(binary, "compare", file, file).CombinedOutput()
	for _, want := range []string{"SELECT c FROM sbtest1 WHERE id=?", "1.00x"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("compare lacks %q: %v\n%s", want, err, out)
		}
	}
}

// doctor finds a MariaDB by its PID and says what works for it.
func TestMySQLDoctor(t *testing.T) {
	s := startMariaDB(t, nil)
	out, err := exec.Command(binary, "doctor", "--pid", fmt.Sprint(s.PID())).CombinedOutput()
	for _, want := range []string{"ok    find PostgreSQL, MySQL or MariaDB", fmt.Sprintf("ok    MariaDB server pid %d", s.PID()),
		"queries from MySQL's client protocol", "waits named by thd_wait_begin", "TLS connections read at ",
		"threads by role: ", "page cleaner 1", "ok    storage under the data directory " + s.DataDir} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("doctor lacks %q: %v\n%s", want, err, out)
		}
	}
}

// A row lock another session holds: the blocked statement's time is in
// the lock box, named as MariaDB names the wait (thd_wait_begin's type).
func TestMySQLRowLockWait(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	if _, err := s.SQL(ctx, "", "CREATE DATABASE locks; CREATE TABLE locks.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; INSERT INTO locks.t VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	explain := startTrace(t, "explain", "--top", "1", "--pid", fmt.Sprint(s.PID()))
	// The holder locks the row, then keeps it for two seconds. Its client
	// prints each result as it comes (--unbuffered): once the locking
	// read's row is out, the row is locked.
	holder := exec.CommandContext(ctx, "mariadb", append(s.ClientArgs(), "--unbuffered", "locks", "-e",
		"BEGIN; SELECT v AS locked FROM t WHERE id = 1 FOR UPDATE; SELECT SLEEP(2); COMMIT")...)
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "locked" {
	}
	if !lines.Scan() { // the row
		t.Fatalf("the holder did not lock the row: %s", holderErr.String())
	}
	go io.Copy(io.Discard, out)
	if _, err := s.SQL(ctx, "locks", "UPDATE t SET v = v + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if err := holder.Wait(); err != nil {
		t.Fatalf("the holder: %v: %s", err, holderErr.String())
	}
	qs, _, _ := tr.stop(t)
	trees := explain.stopText(t)
	checkBoxesAddUp(t, qs)
	blocked := only(t, qs, "UPDATE t SET v = v + ? WHERE id = ?", 1)[0]
	// explain's slowest query is the holder's SLEEP or the blocked update;
	// the update's tree, if it is the one, shows the lock box.
	if !strings.Contains(trees, "SELECT SLEEP(?)") && !(strings.Contains(trees, "UPDATE t SET v = v + ? WHERE id = ?") && strings.Contains(trees, "Lock/RowLock")) {
		t.Errorf("explain does not show the slowest query's tree:\n%s", trees)
	}
	if blocked.LockNs < blocked.QueryNs*9/10 || blocked.Waits["Lock/RowLock"] < blocked.LockNs*9/10 {
		t.Errorf("the blocked update took %v, of it lock %v, waits %v: want 90%% in the lock box, named Lock/RowLock",
			time.Duration(blocked.QueryNs), time.Duration(blocked.LockNs), blocked.Waits)
	}
	t.Logf("blocked update: %v, lock %v, waits %v", time.Duration(blocked.QueryNs), time.Duration(blocked.LockNs), blocked.Waits)
	for _, q := range matching(qs, "SELECT SLEEP") {
		t.Logf("the holder's sleep: %v, waits %v", time.Duration(q.QueryNs), q.Waits)
	}
}

// The file I/O a statement's own thread did, as performance_schema times
// it: its data-file waits (wait/io/file/innodb/innodb_data_file), summed
// over the connection's thread.
const psDataFileIO = `SELECT COUNT_STAR, SUM_TIMER_WAIT DIV 1000 FROM performance_schema.events_waits_summary_by_thread_by_event_name
 WHERE EVENT_NAME = 'wait/io/file/innodb/innodb_data_file'
 AND THREAD_ID = (SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID())`

// greggLine is a MySQL scan's line in the slow-query log, with its fs I/O
// count (the mariadb client names itself: app=mysql).
var greggLine = regexp.MustCompile(`(?m)^\S+ pid \d+ root@scan app=mysql query \S+ \(cpu (?:[^()]|\([^()]*\))*\), fs \S+ \((\d+) I/O, [^)]*\)(, blk \S+ \(\d+ req, [^)]*\))? : SELECT SUM\(LENGTH\(pad\)\) FROM big$`)

// A cold full scan of a table several times the buffer pool: its file
// system reads are the ones performance_schema counts for its thread's
// data-file reads, in the time it says, and it starts block requests;
// warm (from the page cache), none.
func TestMySQLColdScan(t *testing.T) {
	s := startMariaDB(t, nil) // a 32 MB buffer pool, buffered I/O (mysandbox)
	ctx := mysqlContext(t)
	if _, err := s.SQL(ctx, "", `CREATE DATABASE scan; CREATE TABLE scan.big (id INT PRIMARY KEY AUTO_INCREMENT, pad CHAR(255)) ENGINE=InnoDB;
		INSERT INTO scan.big (pad) SELECT REPEAT('x', 255) FROM scan.seq_1_to_400000;
		SET GLOBAL innodb_max_dirty_pages_pct = 0; FLUSH TABLES scan.big FOR EXPORT; UNLOCK TABLES`); err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "slowlog", "--fs", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	gregg := startTrace(t, "slowlog", "--fs", "--min-query", "0", "--pid", fmt.Sprint(s.PID())) // the seeds' line, beside
	var ps [2][2]uint64                                                                         // [cold, warm][count, ns]
	for i := range ps {
		if i == 0 {
			dropCaches(t)
		}
		out, err := s.SQL(ctx, "scan", psDataFileIO+"; SELECT SUM(LENGTH(pad)) FROM big; "+psDataFileIO)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(out) // count, ns; the sum; count, ns
		if len(f) != 5 {
			t.Fatalf("performance_schema said %q", out)
		}
		n := make([]uint64, 5)
		for j := range f {
			n[j], _ = strconv.ParseUint(f[j], 10, 64)
		}
		ps[i] = [2]uint64{n[3] - n[0], n[4] - n[1]}
	}
	// A result of many rows, in many sends: its end is found at the last one's tail.
	rows, err := s.SQL(ctx, "scan", "SELECT id, pad FROM big WHERE id <= 5000")
	if err != nil || strings.Count(rows, "\n") != 4999 {
		t.Fatalf("the 5,000 rows: %v", err)
	}
	qs, _, sum := tr.stop(t)
	log := gregg.stopText(t)
	checkRepliesEnded(t, sum)
	only(t, qs, "SELECT id, pad FROM big WHERE id <= ?", 1)
	scans := only(t, qs, "SELECT SUM(LENGTH(pad)) FROM big", 2)
	cold, warm := scans[0], scans[1]
	// Gregg's slow-query line, for MySQL: "query 538ms (…), fs 509ms (83
	// I/O, …), blk …: SELECT …", its I/O count the JSON record's.
	m := greggLine.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no slow-query line for the scan:\n%s", log)
	}
	if n, _ := strconv.ParseUint(m[1], 10, 64); n < cold.FSCount()*99/100 || n > cold.FSCount()*101/100 {
		t.Errorf("the slow-query line %q counts %d I/O, the record %d", m[0], n, cold.FSCount())
	}
	t.Logf("the slow-query line: %s", m[0])
	t.Logf("cold: %v, fs read %v in %d reads (performance_schema %v in %d), %d block requests, io wait %v; warm: %v, fs read %v in %d (performance_schema %v in %d), %d block requests",
		time.Duration(cold.QueryNs), time.Duration(cold.FSReadNs), cold.FSReadCount, time.Duration(ps[0][1]), ps[0][0], cold.BlkCount, time.Duration(cold.IOWaitNs),
		time.Duration(warm.QueryNs), time.Duration(warm.FSReadNs), warm.FSReadCount, time.Duration(ps[1][1]), ps[1][0], warm.BlkCount)
	// performance_schema counts the same requests (preads, and reads
	// submitted through io_uring, fsio.bpf.c) and times them from inside
	// the server: the call, and InnoDB's own work around it (preparing the
	// request, taking its mutex: about 2 us a read on a quiet machine, where
	// ours is within 10% of its time; more when the machine is busy, as the
	// thread then also waits for a CPU inside that span). So ours is at most
	// its time and 10% (clocks), and what it times beyond ours was spent on
	// CPU, waiting for one, or in the query's other waits.
	count, ns := float64(cold.FSReadCount), float64(cold.FSReadNs)
	psCount, psNs := float64(ps[0][0]), float64(ps[0][1])
	beside := float64(cold.CPUNs + cold.RunqNs + cold.LockNs + cold.LWLockNs + cold.AIOWaitNs + cold.OtherWaitNs)
	if psCount == 0 || math.Abs(count-psCount) > 0.01*psCount || ns > 1.1*psNs || psNs-ns > beside {
		t.Errorf("the cold scan's file system reads: %d in %v; performance_schema: %d in %v; want the same count within 1%%, "+
			"and the time no more than its and 10%%, and no less than its less the query's CPU, run-queue and other waits (%v)",
			cold.FSReadCount, time.Duration(cold.FSReadNs), ps[0][0], time.Duration(ps[0][1]), time.Duration(beside))
	}
	t.Logf("the cold scan's read time is %.1f%% of performance_schema's; its boxes: cpu %v, runq %v, io wait %v, aio wait %v, lock %v, other %v; waits %v",
		100*ns/psNs, time.Duration(cold.CPUNs), time.Duration(cold.RunqNs), time.Duration(cold.IOWaitNs), time.Duration(cold.AIOWaitNs),
		time.Duration(cold.LockNs), time.Duration(cold.OtherWaitNs), cold.Waits)
	if cold.BlkCount == 0 || cold.BlkReadCount == 0 {
		t.Errorf("the cold scan started no block requests: %+v", cold)
	}
	// Bytes, not requests: the kernel merges a cold scan's reads into
	// requests of up to megabytes (61 for 116 MiB in one run), where a
	// few pages the warm scan finds evicted are requests of their own.
	if warm.BlkBytes > cold.BlkBytes/20 {
		t.Errorf("the warm scan's block requests read %d bytes (%d reads), the cold one's %d (%d)",
			warm.BlkBytes, warm.BlkReadCount, cold.BlkBytes, cold.BlkReadCount)
	}
}

// A server's threads do their I/O under their roles, as many operations
// as performance_schema counts for the threads it names so: InnoDB's task
// pool (page writes, purge reads, data-file syncs) and its page cleaner
// (the doublewrite batches, syncs). The connections' own I/O under a write
// load is the redo log, which 10.11 does not instrument.
func TestMySQLThreadRoles(t *testing.T) {
	s := startMariaDB(t, map[string]string{"innodb_max_dirty_pages_pct": "0"}) // the page cleaner flushes all the time
	ctx := mysqlContext(t)
	o := mysandbox.SysbenchOptions{Test: "oltp_write_only", Tables: 2, TableSize: 10000, Threads: 2, Time: 3}
	if _, err := s.Sysbench(ctx, o, "prepare"); err != nil {
		t.Fatal(err)
	}
	// The edges are quiet: the load's pages are written back before the
	// trace, and the run's before the reference is read.
	waitFlushed(t, s)
	before := psFileOps(t, s)
	iops := startTrace(t, "iops", "--json", "--pid", fmt.Sprint(s.PID()), "0.5")
	hist := startTrace(t, "hist", "--json", "--pid", fmt.Sprint(s.PID()), "0.5")
	if _, err := s.Sysbench(ctx, o, "run"); err != nil {
		t.Fatal(err)
	}
	waitFlushed(t, s)
	after := psFileOps(t, s)
	_, intervals, _ := iops.stop(t)
	_, _, hsum := hist.stop(t)
	type ops struct{ reads, writes, syncs float64 }
	byRole := map[string]*ops{}
	for _, iv := range intervals {
		for _, r := range iv.Rates {
			if r.Layer != "fs" {
				continue
			}
			if byRole[r.Role] == nil {
				byRole[r.Role] = &ops{}
			}
			byRole[r.Role].reads += r.ReadOps * iv.Seconds
			byRole[r.Role].writes += r.WriteOps * iv.Seconds
			byRole[r.Role].syncs += r.SyncOps * iv.Seconds
		}
	}
	for role, o := range byRole {
		t.Logf("%-14s fs reads %5.0f, writes %5.0f, syncs %5.0f", role, o.reads, o.writes, o.syncs)
		switch role {
		case mysql.RoleConnection, mysql.RoleInnoDBTask, mysql.RolePageCleaner, mysql.RoleInnoDBAIO, mysql.RoleBackground, mysql.RoleServer:
		default:
			t.Errorf("file system I/O under %q, not one of the server's thread roles", role)
		}
	}
	ref := func(name string) float64 { return float64(after[name] - before[name]) }
	total := func(role string) float64 {
		if o := byRole[role]; o != nil {
			return o.reads + o.writes + o.syncs
		}
		return 0
	}
	workers, cleaner := ref("thread/innodb/thread_pool_thread"), ref("thread/innodb/page_cleaner_thread")
	t.Logf("performance_schema: task pool %.0f, page cleaner %.0f file operations", workers, cleaner)
	// The task pool: the same operations (5% for requests on the trace's
	// edges; here within 1%).
	if got := total(mysql.RoleInnoDBTask); workers == 0 || math.Abs(got-workers) > 0.05*workers {
		t.Errorf("InnoDB's task pool: %.0f file system operations, performance_schema %.0f: want within 5%%", got, workers)
	}
	// The page cleaner also makes the checkpoints: it writes and syncs the
	// redo log, which performance_schema does not see (a write and a sync
	// or two per checkpoint: at most three operations per sync of ours).
	if o := byRole[mysql.RolePageCleaner]; o == nil || cleaner == 0 || total(mysql.RolePageCleaner) < 0.98*cleaner ||
		total(mysql.RolePageCleaner) > cleaner+3*o.syncs {
		t.Errorf("the page cleaner: %+v, performance_schema %.0f operations: want as many and its checkpoints'", o, cleaner)
	}
	if o := byRole[mysql.RoleConnection]; o == nil || o.writes == 0 || o.syncs == 0 {
		t.Errorf("the connections wrote and synced no redo log: %+v", o)
	}
	// hist, traced beside it, times the same writes (2% for the traces'
	// edges, quiet here).
	var writes float64
	for _, o := range byRole {
		writes += o.writes
	}
	if h := hsum.Hists["fs_write"]; h == nil || math.Abs(float64(h.Count)-writes) > 0.02*writes {
		t.Errorf("hist's fs_write histogram %+v; iops counted %.0f writes", h, writes)
	}
}

// waitFlushed waits until InnoDB has no dirty pages: the page cleaner
// wrote back all it had to.
func waitFlushed(t *testing.T, s *mysandbox.Server) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err := s.SQL(mysqlContext(t), "", "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(strings.TrimSpace(out), "\t0") {
			return
		}
	}
	t.Fatal("InnoDB still has dirty pages after a minute")
}

// psFileOps reads performance_schema's file I/O counts by thread name.
func psFileOps(t *testing.T, s *mysandbox.Server) map[string]uint64 {
	t.Helper()
	out, err := s.SQL(mysqlContext(t), "", `SELECT t.NAME, SUM(w.COUNT_STAR) FROM performance_schema.threads t
		JOIN performance_schema.events_waits_summary_by_thread_by_event_name w USING (THREAD_ID)
		WHERE w.EVENT_NAME LIKE 'wait/io/file/%' GROUP BY t.NAME`)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, v, ok := strings.Cut(line, "\t"); ok {
			m[name], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return m
}

// A statement that fails after some of its rows were sent: its reply ends
// with an ERR in place of the rest, recognized there (mysql_reply_unseen
// stays 0), not at the connection's next command (here its COM_QUIT).
func TestMySQLErrorMidResult(t *testing.T) {
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	if _, err := s.SQL(ctx, "", `CREATE DATABASE e; CREATE TABLE e.big (id INT PRIMARY KEY, pad CHAR(200));
		INSERT INTO e.big SELECT seq, REPEAT('x', 200) FROM e.seq_1_to_5000;
		CREATE TABLE e.dup (k INT); INSERT INTO e.dup VALUES (4000), (4000)`); err != nil {
		t.Fatal(err)
	}
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	// The subquery returns two rows for id 4000: ERROR 1242 after 3,999
	// rows (about 800 KB, many sends), which the client prints as they
	// come (--quick).
	out, err := exec.CommandContext(ctx, "mariadb", append(s.ClientArgs(), "--quick", "--batch", "-D", "e", "-e",
		"SELECT id, pad, (SELECT k FROM dup WHERE dup.k = big.id) FROM big ORDER BY id")...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "1242") || strings.Count(string(out), "\n") < 1000 {
		t.Fatalf("the statement did not fail mid-result: %v, %d lines before", err, strings.Count(string(out), "\n"))
	}
	qs, _, sum := tr.stop(t)
	checkRepliesEnded(t, sum)
	only(t, qs, "SELECT id, pad, (SELECT k FROM dup WHERE dup.k = big.id) FROM big ORDER BY id", 1)
}

// With statements counted in the kernel (serve, top), the reply to a
// statement whose last reply was a result set has its end looked for at
// its first send's tail alone, without walking the column definitions
// (mysql_reply_sent). Replies that defeat that: the same statement's rows grown
// past one send (1 MB: walked after all), and an error mid-result after
// the same statement succeeded. Each reply ends where it is sent
// (mysql_reply_unseen stays 0), and top counts every statement.
func TestMySQLKnownResultsEnded(t *testing.T) {
	sideBySide(t)
	s := startMariaDB(t, nil)
	checkKnownResultsEnded(t, s.PID(), func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "mariadb", append(s.ClientArgs(), args...)...)
	})
}

// checkKnownResultsEnded: TestMySQLKnownResultsEnded's check, on the
// server of pid, its client run with args by client.
func checkKnownResultsEnded(t *testing.T, pid int, client func(ctx context.Context, args ...string) *exec.Cmd) {
	ctx := mysqlContext(t)
	run := func(script string, args ...string) string {
		t.Helper()
		cmd := client(ctx, args...)
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput() // --force: the client goes on past errors, and exits 0
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	digits := "(0), (1), (2), (3), (4), (5), (6), (7), (8), (9)"
	run(`CREATE DATABASE e; CREATE TABLE e.d (n INT); INSERT INTO e.d VALUES ` + digits + `;
		CREATE TABLE e.big (id INT PRIMARY KEY, pad CHAR(200));
		INSERT INTO e.big SELECT a.n + 10*b.n + 100*c.n + 1000*d.n + 1, REPEAT('x', 200)
			FROM e.d a, e.d b, e.d c, e.d d WHERE a.n + 10*b.n + 100*c.n + 1000*d.n < 5000;
		CREATE TABLE e.dup (k INT); INSERT INTO e.dup VALUES (4000), (4000);`)
	tr := startTrace(t, "top", "--json", "--interval", "1s", "--pid", fmt.Sprint(pid))
	const (
		rows   = "SELECT id, pad FROM big WHERE id <= %d;\n"
		failer = "SELECT id, pad, (SELECT k FROM dup WHERE dup.k = big.id) FROM big WHERE id <= %d;\n"
	)
	var script strings.Builder
	for _, n := range []int{3, 3, 3, 5000, 3, 5000, 3} {
		fmt.Fprintf(&script, rows, n)
	}
	for _, n := range []int{3, 3, 5000} { // the last fails at id 4000 (ERROR 1242)
		fmt.Fprintf(&script, failer, n)
	}
	if out := run(script.String(), "--quick", "--force", "-D", "e"); !strings.Contains(out, "ERROR 1242") {
		t.Fatalf("the last statement did not fail: %s", out[max(0, len(out)-300):])
	}
	time.Sleep(1500 * time.Millisecond) // the interval that holds the last of them
	tr.cmd.Process.Signal(syscall.SIGINT)
	if err := tr.cmd.Wait(); err != nil {
		t.Fatalf("dbiolat top exited with %v: %s", err, tr.stderr.String())
	}
	calls := map[string]uint64{}
	var last top.Frame
	for _, line := range strings.Split(strings.TrimSpace(tr.stdout.String()), "\n") {
		var f top.Frame
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if f.Type != "top" { // the summary at the end: the same calls again
			continue
		}
		last = f
		for _, r := range f.Fingerprints {
			calls[r.Query] += r.Calls
		}
	}
	for query, want := range map[string]uint64{
		"SELECT id, pad FROM big WHERE id <= ?":                                           7,
		"SELECT id, pad, (SELECT k FROM dup WHERE dup.k = big.id) FROM big WHERE id <= ?": 3,
	} {
		if calls[query] != want {
			t.Errorf("%q: top counted %d, the client ran %d: %v", query, calls[query], want, calls)
		}
	}
	if n := last.Drops["mysql_reply_unseen"]; n != 0 {
		t.Errorf("%d replies' ends were not recognized", n)
	}
}

// A COM_QUERY of several statements (CLIENT_MULTI_STATEMENTS: the client
// sends them in one command) is one round trip: one record, its text the
// whole command, ending with the last statement's result, not the first.
func TestMySQLMultiStatements(t *testing.T) {
	s := startMariaDB(t, nil)
	ctx := mysqlContext(t)
	tr := startTrace(t, "slowlog", "--json", "--min-query", "0", "--pid", fmt.Sprint(s.PID()))
	// With another delimiter, the client sends the three as one command.
	out, err := s.SQL(ctx, "", "DELIMITER //\nSELECT 1; SELECT SLEEP(0.3); SELECT 3 //\n")
	if err != nil || strings.Fields(out)[0] != "1" || strings.Fields(out)[2] != "3" {
		t.Fatalf("the statements: %v %q", err, out)
	}
	qs, _, sum := tr.stop(t)
	checkRepliesEnded(t, sum)
	q := only(t, qs, "SELECT ?; SELECT SLEEP(?); SELECT ?", 1)[0]
	if q.QueryNs < uint64(300*time.Millisecond) {
		t.Errorf("the command took %v: it ended before its last statement's result", time.Duration(q.QueryNs))
	}
}
