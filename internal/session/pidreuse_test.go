package session

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A pid the kernel gives again (pid_max is 32768 on many machines: a busy
// server's connections go round it in minutes) belongs to another
// process: its queries carry their own user and database, not those kept
// of the process that had the pid before (kept a while after its exit, for
// its late records). The kernel is made to give the pid again by setting
// the last pid it gave (ns_last_pid).
func TestPidTakenAgainIsAnotherProcess(t *testing.T) {
	testenv.NeedRoot(t)
	ctx := context.Background()
	c, err := pgsandbox.Start(ctx, pgsandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := c.Psql(ctx, "postgres", "CREATE ROLE pid_reuser LOGIN;\nCREATE DATABASE pid_reused OWNER pid_reuser;"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{PID: c.PostmasterPID(), Families: probe.Default, Emit: probe.EmitAll})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const marker = "pid_taken_again"
	var seen []*model.Query // the records of the marked query, in order
	poll := func() {
		t.Helper()
		err := s.Poll(time.Now().Add(100*time.Millisecond), func(q *model.Query) {
			if strings.Contains(q.Query, marker) {
				seen = append(seen, q)
			}
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	// psql runs the marked query and args against db (as user, if one),
	// the session polled meanwhile; the backend's pid out.
	psql := func(db, user string, args ...string) int {
		t.Helper()
		args = append([]string{"-A", "-t", "-c", "SELECT pg_backend_pid() AS " + marker}, args...)
		if user != "" {
			args = append(args, "-U", user)
		}
		cmd := c.PsqlCmd(ctx, db, args...)
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for {
			poll()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("psql: %v", err)
				}
				pid, err := strconv.Atoi(strings.Fields(out.String() + " ?")[0])
				if err != nil {
					t.Fatalf("pg_backend_pid: %q", out.String())
				}
				return pid
			default:
			}
		}
	}
	poll() // the session's first walk of the server's processes
	// The second process lives past its query (Poll's walk of the
	// kernel's processes finds it), or exits at once (only its record says).
	for _, tc := range []struct {
		name  string
		after []string
	}{{"lives-on", []string{"-c", "SELECT pg_sleep(0.5)"}}, {"exits-at-once", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			seen = nil
			// The first process lives past its query: Go reads what it is.
			first := psql("postgres", "", "-c", "SELECT pg_sleep(0.5)")
			for i := 0; ; i++ {
				if _, gone := s.exited[uint32(first)]; gone && len(seen) == 1 {
					break
				}
				if i == 100 {
					t.Fatalf("after 10s, %d records of the first backend's query, its exit read: %v", len(seen), s.exited[uint32(first)])
				}
				poll()
			}
			// psql takes the pid before it, the backend its postmaster
			// forks the pid: unless another process of the machine forked
			// in between, or holds the pid now.
			var second int
			for attempt := 0; second != first; attempt++ {
				if attempt == 50 {
					t.Fatalf("the kernel did not give pid %d again in 50 attempts", first)
				}
				if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(first-2)), 0); err != nil {
					t.Fatalf("setting the next pid: %v", err)
				}
				second = psql("pid_reused", "pid_reuser", tc.after...)
			}
			for i := 0; len(seen) < 2; i++ {
				if i == 100 {
					t.Fatalf("after 10s, no record of the second backend's query")
				}
				poll()
			}
			q := seen[len(seen)-1]
			t.Logf("pid %d taken again: its query's pid %d, user %q, database %q", first, q.PID, q.User, q.Database)
			if q.PID != first || q.User != "pid_reuser" || q.Database != "pid_reused" {
				t.Errorf("the second process of pid %d ran as %q on %q, want pid_reuser on pid_reused", first, q.User, q.Database)
			}
		})
	}
}
