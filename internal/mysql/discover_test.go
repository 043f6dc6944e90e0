package mysql

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/procfs"
	"github.com/dbiolat/dbiolat/internal/sandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

func TestOption(t *testing.T) {
	args := []string{"/usr/sbin/mariadbd", "--no-defaults", "--datadir=/var/lib/mysql", "--port", "3307", "-S/run/my.sock", "-h", "/srv/db"}
	for _, c := range []struct {
		long  string
		short byte
		want  string
	}{
		{"datadir", 0, "/var/lib/mysql"},
		{"port", 'P', "3307"},
		{"socket", 'S', "/run/my.sock"},
		{"user", 'u', ""},
	} {
		if got := option(args, c.long, c.short); got != c.want {
			t.Errorf("option %s: %q, want %q", c.long, got, c.want)
		}
	}
	if got := option([]string{"mysqld", "-h", "/srv/db"}, "datadir", 'h'); got != "/srv/db" {
		t.Errorf("-h DIR: %q", got)
	}
	if !bootstrapping([]string{"mariadbd", "--bootstrap", "--datadir=x"}) || !bootstrapping([]string{"mysqld", "--initialize-insecure"}) || bootstrapping(args) {
		t.Error("bootstrapping misread")
	}
}

func TestParseVersionLine(t *testing.T) {
	for _, c := range []struct{ line, flavor, version string }{
		{"/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n", MariaDB, "10.11.19"},
		{"/usr/sbin/mysqld  Ver 8.0.36-0ubuntu0.22.04.1 for Linux on x86_64 ((Ubuntu))\n", MySQL, "8.0.36"},
		{"/usr/sbin/mysqld  Ver 8.0.36-28 for Linux on x86_64 (Percona Server (GPL), Release 28, Revision 47601f19)\n", MySQL, "8.0.36"},
		{"/usr/sbin/mysqld  Ver 9.1.0 for Linux on x86_64 (MySQL Community Server - GPL)\n", MySQL, "9.1.0"},
		{"/usr/sbin/mysqld  Ver 10.3.39-MariaDB-0+deb10u2 for debian-linux-gnu on x86_64 (Debian 10)\n", MariaDB, "10.3.39"},
		{"garbage", "", ""},
	} {
		f, v := parseVersionLine(c.line)
		if f != c.flavor || v != c.version {
			t.Errorf("%q: %q %q, want %q %q", c.line, f, v, c.flavor, c.version)
		}
	}
	for v, want := range map[string]int{"10.11.19": 1011, "8.0.36": 800, "11.4.2": 1104, "5.7.44": 507, "": 0, "x.y": 0, "10": 0} {
		if got := major(v); got != want {
			t.Errorf("major(%q) = %d, want %d", v, got, want)
		}
	}
}

// The strings around the version in Debian 12's mariadbd .rodata and in
// Debian sid's mysqld 9.7.4 (whose bare "9.7.4" is the tail of "MySQL 9.7.4").
func TestVersionLiteral(t *testing.T) {
	for rodata, want := range map[string]string{
		"R\x00NO_INTERNAL_LOOKUP\x00Unknown\x00-0+deb12u1\x0010.11.19-MariaDB\x00x86_64\x00debian-linux-gnu\x00": MariaDB + " 10.11.19",
		"\x009.7.4.0\x00MySQL 9.7.4\x00ndb-9.7.4\x00":                                                            MySQL + " 9.7.4",
		// MariaDB's literal wins over a "MySQL" one (its own text may say MySQL)
		"MySQL 5.5.5\x0011.8.3-MariaDB\x00": MariaDB + " 11.8.3",
	} {
		if f, v := versionLiteral([]byte(rodata)); f+" "+v != want {
			t.Errorf("%q: %s %s, want %s", rodata, f, v, want)
		}
	}
	for _, s := range []string{"see x-MariaDB\x00", "5.5.5-\x00", "built by 1.2-MariaDB\x00", "10.11.19-MariaDB-log\x00",
		"-MariaDB\x00", "MySQL 9.7\x00", "MySQL Server 9.7.4\x00", "the MySQL 9.7.4\x00", "MySQL 9.7.4 (GPL)\x00", "MySQL 9.7.4"} {
		if f, v := versionLiteral([]byte(s)); f != "" || v != "" {
			t.Errorf("%q: got %q %q", s, f, v)
		}
	}
}

// Lines of the listening sockets of a MariaDB on port 53041 (and another
// process's sshd on 2024), and its unix socket beside a connected one.
func TestParseListeners(t *testing.T) {
	tcp := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1494 1 000000006721edf3 100 0 0 10 0
   1: 0100007F:CF31 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2687105 1 00000000e5f25c11 100 0 0 10 0
   2: 0100007F:CF31 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2687999 1 00000000e5f25c11 20 4 30 10 -1
`
	got := parseTCPListeners([]byte(tcp))
	want := []listener{{port: 2024, inode: 1494}, {port: 53041, inode: 2687105}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tcp: %+v, want %+v", got, want)
	}
	tcp6 := `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0CEA 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 31337 1 0000000000000000 100 0 0 10 0
`
	if got := parseTCPListeners([]byte(tcp6)); !reflect.DeepEqual(got, []listener{{port: 3306, inode: 31337}}) {
		t.Errorf("tcp6: %+v", got)
	}
	unix := `Num       RefCount Protocol Flags    Type St Inode Path
0000000090701ae2: 00000002 00000000 00010000 0001 01 2687106 /tmp/myq/d/sock
00000000c1a1b2c3: 00000003 00000000 00000000 0001 03 2687200 /tmp/myq/d/sock
00000000d4d5d6d7: 00000002 00000000 00010000 0001 01 17
`
	if got := parseUnixListeners([]byte(unix)); !reflect.DeepEqual(got, []listener{{path: "/tmp/myq/d/sock", inode: 2687106}, {inode: 17}}) {
		t.Errorf("unix: %+v", got)
	}
	if ino, ok := socketInode("socket:[2687105]"); !ok || ino != 2687105 {
		t.Errorf("socketInode: %d %v", ino, ok)
	}
	if _, ok := socketInode("pipe:[2639770]"); ok {
		t.Error("a pipe read as a socket")
	}
}

func TestChooseListener(t *testing.T) {
	for _, c := range []struct {
		ports []int
		named string
		want  int
	}{
		{nil, "", 0},
		{[]int{33060, 3306}, "", 3306},
		{[]int{33060, 50000}, "", 50000},
		{[]int{33060, 50000, 50001}, "50001", 50001},
		{[]int{33060}, "", 33060},
	} {
		if got := choosePort(c.ports, c.named); got != c.want {
			t.Errorf("choosePort(%v, %q) = %d, want %d", c.ports, c.named, got, c.want)
		}
	}
	if got := chooseSocket([]string{"/run/mysqld/mysqlx.sock", "/run/mysqld/mysqld.sock"}, ""); got != "/run/mysqld/mysqld.sock" {
		t.Errorf("chooseSocket: %q", got)
	}
	if got := chooseSocket([]string{"/a/one.sock", "/a/two.sock"}, "/a/two.sock"); got != "/a/two.sock" {
		t.Errorf("chooseSocket by name: %q", got)
	}
}

// server is a throwaway MariaDB started by a test.
type server struct {
	pid        int
	data, sock string
	port       int
}

// startMariaDB creates a data directory in a temporary directory and
// starts mariadbd on it, listening on a unix socket and on a free TCP port
// of 127.0.0.1; the test's cleanup stops it.
func startMariaDB(t *testing.T) server {
	t.Helper()
	testenv.NotShort(t)
	find := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := "/usr/sbin/" + name; fileExists(p) {
			return p
		}
		return ""
	}
	bin, install := find("mariadbd"), find("mariadb-install-db")
	if bin == "" || install == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("mariadbd and mariadb-install-db are needed, and CI must run this")
		}
		t.Skip("needs mariadbd and mariadb-install-db")
	}
	dir := t.TempDir()
	s := server{data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock")}
	var user []string
	if os.Geteuid() == 0 {
		user = []string{"--user=root"}
	}
	// Temporary tables in a directory of its own: other servers' cleanups
	// of a shared /tmp must not fail its bootstrap.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TMPDIR="+tmp)
	installDB := exec.Command(install, append([]string{"--no-defaults", "--auth-root-authentication-method=normal", "--datadir=" + s.data}, user...)...)
	installDB.Env = env
	out, err := installDB.CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	if s.port, err = sandbox.FreePort(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--no-defaults", "--datadir=" + s.data, "--socket=" + s.sock,
		"--port=" + strconv.Itoa(s.port), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "pid"),
		"--log-error=" + filepath.Join(dir, "err"), "--tmpdir=" + tmp, "--innodb-buffer-pool-size=16M"}, user...)...)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "err.err"))
			t.Fatalf("mariadbd exited:\n%s", log)
		default:
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.port)); err == nil {
			c.Close()
			if fileExists(s.sock) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("mariadbd did not accept connections within a minute")
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestRealServer(t *testing.T) {
	s := startMariaDB(t)
	all, err := Discover()
	if err != nil {
		t.Fatal(err)
	}
	var in Instance
	for _, i := range all {
		if i.PID == s.pid {
			in = i
		}
	}
	if in.PID == 0 {
		t.Fatalf("Discover did not find PID %d among %+v", s.pid, all)
	}
	t.Logf("found %s: port %d, socket %s", in, in.Port, in.Socket)
	if a, b := stat(t, in.DataDir), stat(t, s.data); !os.SameFile(a, b) {
		t.Errorf("DataDir %s, want %s", in.DataDir, s.data)
	}
	if in.Binary != "/proc/"+strconv.Itoa(s.pid)+"/exe" || in.Port != s.port || in.Socket != s.sock || in.Flavor != MariaDB {
		t.Errorf("got %+v, want binary /proc/%d/exe, port %d, socket %s, MariaDB", in, s.pid, s.port, s.sock)
	}
	// The version read from .rodata is the one the binary prints.
	out, err := exec.Command(in.Binary, "--no-defaults", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, v := parseVersionLine(string(out)); in.Version != v || in.Major != major(v) || in.Major < 1000 {
		t.Errorf("version %q (%d), but it says %q", in.Version, in.Major, out)
	}

	if got, err := ByPID(s.pid); err != nil || got != in {
		t.Errorf("ByPID(%d) = %+v, %v", s.pid, got, err)
	}
	tasks, _ := procfs.Tasks(s.pid)
	var tid int
	for _, id := range tasks {
		if id != s.pid {
			tid = id
		}
	}
	if tid == 0 {
		t.Errorf("mariadbd %d has no thread but its first", s.pid)
	} else if got, err := ByPID(tid); err != nil || got != in {
		t.Errorf("ByPID(thread %d) = %+v, %v", tid, got, err)
	}
	if got, err := ByDataDir(s.data); err != nil || got != in {
		t.Errorf("ByDataDir = %+v, %v", got, err)
	}
	if _, err := ByPID(os.Getpid()); err == nil || !strings.Contains(err.Error(), "is not a MySQL or MariaDB server") {
		t.Errorf("ByPID(the test) = %v", err)
	}
	if _, err := ByDataDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no MySQL or MariaDB server is running on") {
		t.Errorf("ByDataDir(an empty directory) = %v", err)
	}

	// What the server says first on a connection reads as its greeting.
	c, err := net.Dial("unix", s.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	g, ok := ParseGreeting(readPacket(t, c))
	if !ok || g.Truncated || !strings.HasPrefix(g.ServerVersion, in.Version+"-MariaDB") || g.ConnectionID == 0 ||
		g.Caps&ClientProtocol41 == 0 || g.Caps&ClientMySQL != 0 || g.MariaDBCaps&MariaDBStmtBulkOps == 0 {
		t.Errorf("greeting %+v %v", g, ok)
	}
	// The server accepts what this package reads: a handshake response
	// as sysbench's (without attributes), a COM_CHANGE_USER, and replies
	// to a prepare as ParsePrepareOK reads.
	const caps = 0x00bfa28c &^ ClientConnectAttrs
	hello := binary.LittleEndian.AppendUint32(nil, caps)
	hello = append(hello, 0, 0, 0, 1, 0x21) // max packet 16M, utf8mb3
	hello = append(hello, make([]byte, 19)...)
	hello = binary.LittleEndian.AppendUint32(hello, g.MariaDBCaps)
	hello = append(hello, "root\x00\x00mysql\x00mysql_native_password\x00"...)
	if h, ok := ParseHandshakeResponse(hello); !ok || h.User != "root" || h.Database != "mysql" || h.Truncated {
		t.Fatalf("our own handshake response reads %+v %v", h, ok)
	}
	writePacket(t, c, 1, hello)
	if ok := readPacket(t, c); len(ok) == 0 || ok[0] != 0 {
		t.Fatalf("the handshake response was refused: % x", ok)
	}
	change := []byte("\x11root\x00\x00test\x00\x21\x00mysql_native_password\x00")
	if cu, ok := ParseChangeUser(change); !ok || cu.User != "root" || cu.Database != "test" {
		t.Errorf("ParseChangeUser: %+v %v", cu, ok)
	}
	writePacket(t, c, 0, change)
	reply := readPacket(t, c)
	if len(reply) > 0 && reply[0] == 0xfe { // an auth switch: the empty password again
		writePacket(t, c, 2, nil)
		reply = readPacket(t, c)
	}
	if len(reply) == 0 || reply[0] != 0 {
		t.Fatalf("COM_CHANGE_USER was refused: % x", reply)
	}
	// The server read the database where ParseChangeUser does.
	writePacket(t, c, 0, []byte("\x03SELECT DATABASE()"))
	if rows := readRows(t, c); len(rows) != 1 || string(rows[0]) != "\x04test" { // one length-prefixed value
		t.Errorf("after COM_CHANGE_USER to test, SELECT DATABASE() returns % x", rows)
	}
	writePacket(t, c, 0, []byte("\x16SELECT ?, DATABASE()"))
	reply = readPacket(t, c)
	if p, ok := ParsePrepareOK(reply); !ok || p.StmtID != 1 || p.Params != 1 || p.Columns != 2 {
		t.Errorf("prepare's reply %+v %v from % x", p, ok, reply)
	}
}

func readPacket(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("reading a packet: %v", err)
	}
	b := make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading a packet: %v", err)
	}
	return b
}

// readRows reads a result set (without CLIENT_DEPRECATE_EOF): its column
// count, definitions and EOF, then its rows and EOF.
func readRows(t *testing.T, c net.Conn) [][]byte {
	t.Helper()
	eof := func(p []byte) bool { return len(p) > 0 && p[0] == 0xfe && len(p) < 9 }
	if p := readPacket(t, c); len(p) == 0 || p[0] == 0xff || p[0] == 0 {
		t.Fatalf("no result set: % x", p)
	}
	for !eof(readPacket(t, c)) {
	}
	var rows [][]byte
	for p := readPacket(t, c); !eof(p); p = readPacket(t, c) {
		rows = append(rows, p)
	}
	return rows
}

func writePacket(t *testing.T, c net.Conn, seq byte, payload []byte) {
	t.Helper()
	h := []byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}
	if _, err := c.Write(append(h, payload...)); err != nil {
		t.Fatal(err)
	}
}

func stat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
