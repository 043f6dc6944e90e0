package session

import (
	"context"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// A poll is quiet (serve then waits a second for the next) only when it
// found nothing to hurry for: records filling the ring buffer past its
// share, a process started or ended; the poll after, with nothing new, is
// quiet again.
func TestQuietPolls(t *testing.T) {
	testenv.NeedRoot(t)
	poll := func(s *Session) (quiet bool, records int) {
		t.Helper()
		if err := s.Poll(time.Now(), func(*model.Query) { records++ }, nil); err != nil {
			t.Fatal(err)
		}
		return s.Quiet(), records
	}

	t.Run("records", func(t *testing.T) {
		b, s := tracedBackend(t, probe.PGWire|probe.Sched)
		poll(s) // the process just tracked
		if quiet, _ := poll(s); !quiet {
			t.Fatal("a poll with nothing new is not quiet")
		}
		const n = 20000 // a record each, undrained: well over a sixteenth of the ring buffer
		if _, err := b.Run(n, 0, 16); err != nil {
			t.Fatal(err)
		}
		if quiet, records := poll(s); quiet || records == 0 {
			t.Errorf("the poll that found %d records of %d queries is quiet (%v), its backlog %.3f of the ring buffer",
				records, n, quiet, s.tracer.QueriesBacklog())
		}
		if quiet, _ := poll(s); !quiet {
			t.Error("the poll after the records were read is not quiet")
		}
	})

	t.Run("processes", func(t *testing.T) {
		ctx := context.Background()
		c, err := pgsandbox.Start(ctx, pgsandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		s, err := Open(Config{PID: c.PostmasterPID(), Families: probe.Default, Emit: probe.EmitAll})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// The server's own processes may start one now and then (an
		// autovacuum worker): a quiet poll comes within a few.
		quiet := false
		for i := 0; i < 20 && !quiet; i++ {
			time.Sleep(50 * time.Millisecond)
			quiet, _ = poll(s)
		}
		if !quiet {
			t.Fatal("no quiet poll in 20 on an idle server")
		}
		if _, err := c.Psql(ctx, "postgres", "SELECT 1"); err != nil { // a backend starts, answers, ends
			t.Fatal(err)
		}
		if quiet, _ := poll(s); quiet {
			t.Error("the poll after a connection's backend started and ended is quiet")
		}
	})
}
