package postgres

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/elfvar"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The tables against live servers of every version: every code of every
// class is written where an idle backend's my_wait_event_info points, and
// pg_stat_activity, which names it with the server's own
// pgstat_get_wait_event, is asked what it is. The log has each class's
// names in numbering order, to write a new version's table from (add it to
// pgsandbox.Versions, run this, copy).
func TestWaitEventTablesLive(t *testing.T) {
	testenv.NeedRoot(t) // writing another user's process memory
	for _, v := range pgsandbox.Versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			checkWaitEventsLive(t, v)
		})
	}
}

func checkWaitEventsLive(t *testing.T, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := pgsandbox.Start(ctx, pgsandbox.Options{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	// The idle backend: psql's session, waiting for its next command
	// (Client/ClientRead), which it is never sent.
	idle := c.PsqlCmd(ctx, "", "-qAt")
	stdin, err := idle.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := idle.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); idle.Wait() }()
	io.WriteString(stdin, "SELECT pg_backend_pid();\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid == 0 {
		t.Fatalf("the idle backend's pid: %q, %v", line, err)
	}
	ptr, err := elfvar.Address(pid, fmt.Sprintf("/proc/%d/exe", pid), WaitEventVariable)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var p [8]byte
	if _, err := mem.ReadAt(p[:], int64(ptr)); err != nil {
		t.Fatal(err)
	}
	where := int64(binary.LittleEndian.Uint64(p[:]))
	// name writes the code and asks for its name; the answer counts if
	// the code was still there after it (the backend, woken by a signal,
	// may have set its own meanwhile).
	name := func(code uint32) string {
		var b [4]byte
		for range 5 {
			binary.LittleEndian.PutUint32(b[:], code)
			if _, err := mem.WriteAt(b[:], where); err != nil {
				t.Fatal(err)
			}
			out, err := c.Psql(ctx, "", fmt.Sprintf("SELECT coalesce(wait_event_type, '') || '/' || coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = %d", pid))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.ReadAt(b[:], where); err != nil {
				t.Fatal(err)
			}
			if binary.LittleEndian.Uint32(b[:]) == code {
				return out
			}
		}
		t.Fatalf("the idle backend keeps setting its own wait event over %#08x", code)
		return ""
	}
	v, _ := strconv.Atoi(version)
	if v >= 17 { // every name the server lists, and Extension once
		listed := atoi(t, c, ctx, "SELECT count(*) FROM pg_wait_events")
		named := 1
		for _, names := range waitEventTables[v] {
			for _, n := range names {
				if n != "" {
					named++
				}
			}
		}
		t.Logf("PostgreSQL %s: pg_wait_events lists %d, the table names %d", version, listed, named)
		if listed != named {
			t.Errorf("PostgreSQL %s: pg_wait_events lists %d events, the table %d", version, listed, named)
		}
	}
	for class := WaitEvent(waitClassLWLock); class < waitClassInjectionPoint; class++ {
		if class == waitClassExtension || waitClassNames[class] == "" {
			continue
		}
		// Each class's names until one it does not know; LWLocks have
		// gaps (removed locks) before their tranches, and end at the
		// first id handed to extensions.
		var names []string
		for id := WaitEvent(0); id < 0x400; id++ {
			cls, n, _ := strings.Cut(name(uint32(class<<24|id)), "/")
			if class == waitClassLWLock && id < 0x40 && (n == "" || strings.HasPrefix(n, "<unassigned")) {
				names = append(names, "")
				continue
			}
			if cls != (class<<24).classOn(v) || n == "" || n == "???" || n == "unknown wait event" || n == "extension" ||
				n == "pg_stat_statements" {
				break
			}
			names = append(names, n)
			if n == "BufferPin" { // the one event of its class, whatever the id (15, 16)
				break
			}
		}
		t.Logf("PostgreSQL %s %s, %d events: %q", version, (class << 24).classOn(v), len(names), names)
		table, ok := waitEventTables[v]
		if !ok {
			t.Errorf("PostgreSQL %d has no table", v)
			continue
		}
		if fmt.Sprint(table[class]) != fmt.Sprint(names) {
			t.Errorf("PostgreSQL %d %s: the table has %q", v, (class << 24).classOn(v), table[class])
		}
	}
}

func atoi(t *testing.T, c *pgsandbox.Cluster, ctx context.Context, sql string) int {
	t.Helper()
	out, err := c.Psql(ctx, "", sql)
	n, cerr := strconv.Atoi(out)
	if err != nil || cerr != nil {
		t.Fatalf("%s: %q, %v", sql, out, err)
	}
	return n
}
