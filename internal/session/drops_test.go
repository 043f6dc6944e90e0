package session

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/loadgen"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

func TestMain(m *testing.M) {
	loadgen.ServeIfBackend() // the synthetic backend is this test binary again
	os.Exit(m.Run())
}

// Every query the synthetic backend answers is delivered as a record or
// counted as dropped: nothing is lost unseen, one query at a time,
// pipelined, or in a burst larger than the ring buffer with no drain,
// where some must be dropped. Whether a drained run drops none is a rate
// the shared machine may not hold that second: bench/overhead -capacity
// measures it.
func TestDeliveredPlusDroppedIsSent(t *testing.T) {
	testenv.NeedRoot(t)
	for _, c := range []struct {
		name     string
		n, batch int
		drain    bool
	}{
		{"one at a time", 20000, 1, true},
		{"pipelined", 20000, 16, true},
		{"a burst larger than the ring buffer, not drained", 100000, 16, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			delivered, queries, drops, elapsed := runLoad(t, c.n, c.batch, c.drain)
			t.Logf("%d queries in %v: %d delivered, %d queries counted, drops %+v", c.n, elapsed, delivered, queries, drops)
			if queries != uint64(c.n) {
				t.Errorf("the kernel counted %d queries, the client sent %d", queries, c.n)
			}
			if delivered+drops.Lost() != uint64(c.n) || drops.Lost() != drops.Of("ringbuf_full") {
				t.Errorf("%d delivered + %d lost (%d ring buffer full) != %d sent", delivered, drops.Lost(), drops.Of("ringbuf_full"), c.n)
			}
			if !c.drain && drops.Of("ringbuf_full") == 0 {
				t.Errorf("no ring buffer drops, though %d records cannot fit", c.n)
			}
		})
	}
	// The memory budget docs/overhead.md states, after 140,000 records.
	if rss := peakRSS(); rss > testenv.MemoryBudget {
		t.Errorf("peak RSS %d MiB, over the budget of %d MiB", rss>>20, testenv.MemoryBudget>>20)
	}
}

// tracedBackend starts a synthetic backend and a session of processes
// tracing it with the families, every query a record; both end with t.
func tracedBackend(t *testing.T, families probe.Families) (*loadgen.Backend, *Session) {
	t.Helper()
	b, err := loadgen.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s, err := OpenProcesses(families, probe.EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Track(b.PID(), true); err != nil {
		t.Fatal(err)
	}
	return b, s
}

// runLoad sends n queries to a synthetic backend traced with every query
// a record, polling as the commands do when drain is set, else only at
// the end.
func runLoad(t *testing.T, n, batch int, drain bool) (delivered, queries uint64, drops model.Drops, elapsed time.Duration) {
	t.Helper()
	b, s := tracedBackend(t, probe.PGWire|probe.Sched)
	done := make(chan error, 1)
	go func() {
		var err error
		elapsed, err = b.Run(n, 0, batch)
		done <- err
	}()
	count := func(*model.Query) { delivered++ }
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		case <-time.After(100 * time.Millisecond):
			if drain {
				if err := s.Poll(time.Now(), count, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := s.Poll(time.Now(), count, nil); err != nil {
		t.Fatal(err)
	}
	var err error
	if drops, err = s.Drops(); err != nil {
		t.Fatal(err)
	}
	if queries, err = s.Queries(); err != nil {
		t.Fatal(err)
	}
	return delivered, queries, drops, elapsed
}

// A session of processes only (bench's fio, the synthetic backend) never
// attaches a server it finds, started before or after it: the queries of
// a PostgreSQL on the same host would be counted as the processes'.
func TestOpenProcessesTracesNoServer(t *testing.T) {
	testenv.NeedRoot(t)
	s, err := OpenProcesses(probe.PGWire|probe.Sched, probe.EmitAll)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := pgsandbox.Start(context.Background(), pgsandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	var queries int
	count := func(*model.Query) { queries++ }
	for end := time.Now().Add(3 * followEvery); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := s.Poll(time.Now(), count, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Psql(context.Background(), "postgres", "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.Servers()); n != 0 || queries != 0 {
		t.Errorf("a session of processes attached %d servers and delivered %d queries of them", n, queries)
	}
}
