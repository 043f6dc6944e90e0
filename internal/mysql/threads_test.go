package mysql

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/mysandbox"
	"github.com/dbiolat/dbiolat/internal/procfs"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The roles ThreadRole reads from the threads' stacks are the ones the
// server itself names in performance_schema.threads (on in the sandbox),
// for every thread it lists; the one it does not list, InnoDB's io_uring
// reaper, is told by its system call.
func TestThreadRolesMatchPerformanceSchema(t *testing.T) {
	testenv.NotShort(t)
	s, err := mysandbox.Start(mysandbox.Options{})
	if errors.Is(err, mysandbox.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A connection that waits (in SLEEP) while the threads are read.
	sleeper := exec.CommandContext(ctx, "mariadb", append(s.ClientArgs(), "-e", "SELECT SLEEP(20)")...)
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	var rows []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := s.SQL(ctx, "", "SELECT THREAD_OS_ID, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
		if err != nil {
			t.Fatal(err)
		}
		if rows = strings.Split(strings.TrimSpace(out), "\n"); strings.Contains(out, "SLEEP") || strings.Count(out, "one_connection") >= 2 || time.Now().After(deadline) {
			break
		}
	}
	named := map[int]string{} // tid -> performance_schema's name
	for _, r := range rows {
		id, name, _ := strings.Cut(r, "\t")
		tid, _ := strconv.Atoi(id)
		named[tid] = name
	}
	want := func(name string) string {
		switch name {
		case "thread/sql/main":
			return RoleServer
		case "thread/sql/one_connection":
			return RoleConnection
		case "thread/innodb/page_cleaner_thread":
			return RolePageCleaner
		case "thread/innodb/thread_pool_thread":
			return RoleInnoDBTask
		case "":
			return RoleInnoDBAIO // not listed: the io_uring reaper
		}
		return RoleBackground
	}
	in, err := ByPID(s.PID())
	if err != nil {
		t.Fatal(err)
	}
	threads, err := NewThreads(in)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := procfs.Tasks(s.PID())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, tid := range tasks {
		var role string
		var ok bool
		for try := 0; try < 50 && !ok; try++ { // a thread's stack is read while it waits
			if role, ok = threads.ThreadRole(tid); !ok {
				time.Sleep(20 * time.Millisecond)
			}
		}
		name, listed := named[tid]
		if !ok && listed {
			t.Errorf("thread %d (%s): no role", tid, name)
			continue
		}
		if w := want(name); ok && role != w {
			t.Errorf("thread %d (%q in performance_schema): role %q, want %q", tid, name, role, w)
		}
		got[role]++
	}
	t.Logf("roles: %v", got)
	for _, r := range []string{RoleServer, RoleConnection, RolePageCleaner, RoleInnoDBTask, RoleInnoDBAIO} {
		if got[r] == 0 {
			t.Errorf("no thread has the role %q: %v", r, got)
		}
	}
}
