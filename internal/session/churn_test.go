package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A new connection every few milliseconds for a minute (pgbench -C): every
// query is seen, and what the session holds per process or request, in
// the kernel and in Go, comes back down to what the live processes need;
// nothing grows with the number of connections made.
func TestConnectionChurnKeepsStateBounded(t *testing.T) {
	testenv.NeedRoot(t)
	ctx := context.Background()
	c, err := pgsandbox.Start(ctx, pgsandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if _, err := c.Pgbench(ctx, "postgres", "-i", "-q", "-s", "1"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Config{PID: c.PostmasterPID(), Families: probe.Default, Emit: probe.EmitAll})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := s.StateSizes()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = c.Pgbench(ctx, "postgres", "-n", "-C", "-S", "-c", "2", "-T", "60")
		done <- err
	}()
	var seen uint64
	onQuery := func(q *model.Query) {
		if strings.HasPrefix(q.Query, "SELECT abalance FROM pgbench_accounts") {
			seen++
		}
	}
	peak := map[string]int{}
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		if err := s.Poll(time.Now().Add(100*time.Millisecond), onQuery, nil); err != nil {
			t.Fatal(err)
		}
		sizes, err := s.StateSizes()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range sizes {
			peak[k] = max(peak[k], v)
		}
	}
	for i := 0; i < 2; i++ { // the exits of the last second are folded a second later
		if err := s.Poll(time.Now().Add(1100*time.Millisecond), onQuery, nil); err != nil {
			t.Fatal(err)
		}
	}
	after, err := s.StateSizes()
	if err != nil {
		t.Fatal(err)
	}
	res, err := pgsandbox.ParsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections, %d queries seen; state before %v, peak %v, after %v", res.Transactions, seen, before, peak, after)
	// -S -C: one connection, one SELECT per transaction.
	if seen != uint64(res.Transactions) {
		t.Errorf("saw %d queries of pgbench's %d", seen, res.Transactions)
	}
	drops, err := s.Drops()
	if err != nil {
		t.Fatal(err)
	}
	if drops.Lost() != 0 {
		t.Errorf("lost records: %+v", drops)
	}
	// The kernel's per-process state is back to the processes that live,
	// and the block requests in flight now (the machine's, some): tens of
	// thousands of connections left nothing each. (Go keeps the roles of
	// exited processes for forgetAfter: a window of time, not a count.)
	for _, k := range []string{"procs", "threads", "inflight", "proc_totals", "blk_totals", "statements"} {
		if after[k] > before[k]+64 {
			t.Errorf("%s: %d entries before %d connections, %d after", k, before[k], res.Transactions, after[k])
		}
	}
}
