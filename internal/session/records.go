package session

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/sqlnorm"
	"golang.org/x/sys/unix"
)

// From the kernel's records to the model's: queries and processes, named
// and timed on the wall clock.

// waits names a query's time asleep by wait event, as its server does.
func (s *Session) waits(t *traced, e *probe.QueryEvent) map[string]uint64 {
	var out map[string]uint64
	for _, w := range e.Waits {
		if w.Event == 0 {
			continue
		}
		name := model.OtherWaitEvents
		if w.Event != probe.WaitEventsOther {
			name = t.waitName(w.Event)
		}
		if out == nil {
			out = map[string]uint64{}
		}
		out[name] += w.Ns
	}
	return out
}

// waitHistName names a wait histogram's event. The kernel keeps them by
// server version and event, not by server, so a name only a server knows
// (a PostgreSQL extension's LWLock tranche) is taken from the traced
// servers of that version that know one, if they agree.
func (s *Session) waitHistName(version int, event uint32) string {
	generic := waitName(version, event)
	name := ""
	for _, t := range s.servers {
		if t.about().Version != strconv.Itoa(version) {
			continue
		}
		switch n := t.waitName(event); {
		case n == generic: // it knows no better: not one of its, or not named
		case name != "" && n != name: // two servers, two extensions: no one name
			return generic
		default:
			name = n
		}
	}
	return cmp.Or(name, generic)
}

// describe caches what a process or thread is, as its server tells; one
// that is gone keeps the role its queries imply.
func (s *Session) describe(pid uint32) proc {
	if p, ok := s.procs[pid]; ok && !p.again {
		return p
	}
	p := proc{role: model.RoleUnknown}
	if t := s.servers[s.owner(pid)]; t != nil {
		if r, ok := t.role(pid); ok {
			p = r
		}
	}
	s.procs[pid] = p
	return p
}

func wallOffset() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(time.Now().UnixNano() - ts.Nano())
}

// quietBacklog: a poll that found less than this share of the query ring
// buffer filled, and no process starting or ending, is quiet (Quiet).
const quietBacklog = 1.0 / 16

// Quiet says the last Poll found nothing to hurry for: no process started
// or ended (whose role is best read while it lives) and the query ring
// buffer held little (under a sixteenth: even had the last poll been a
// tenth of a second before, a second's wait leaves it short of full).
// serve then polls once a second, not ten times: each wakeup of an idle
// process costs far more than its work.
func (s *Session) Quiet() bool { return s.quiet }

// Poll delivers the query records that arrived, until the deadline, and
// the runs of processes that exited.
func (s *Session) Poll(deadline time.Time, onQuery func(*model.Query), onProcess func(*model.Process)) error {
	s.sampleCost()
	s.follow()
	came := 0 // processes that started or ended
	// Learn new processes' roles while they live: a short autovacuum
	// worker is gone by the time its record is read. Not while paused
	// (duty cycles): nothing they do is measured then, and the walk of
	// the map is half of an idle serve's CPU.
	if !s.tracer.Paused() {
		pids, err := s.tracer.NewProcs()
		if err != nil {
			return err
		}
		came += len(pids)
		for pid, server := range pids {
			if _, gone := s.exited[pid]; gone { // its pid taken again: another process
				s.forget(pid)
			}
			s.owners[pid] = server
			s.describe(pid)
		}
	}
	if err := s.tracer.ReadQueries(deadline, func(e *probe.QueryEvent, text []byte) {
		s.records++
		if q := s.query(e, text); q != nil {
			onQuery(q)
		}
	}); err != nil {
		return err
	}
	now := time.Now()
	err := s.tracer.ReadProcRuns(func(r *probe.ProcRun) {
		came++
		s.exited[r.Pid] = exit{seen: now, endNs: r.EndNs}
		s.owners[r.Pid] = int(r.Instance) // a short connection's, gone before Poll saw it
		s.unfolded = append(s.unfolded, r.Pid)
		if onProcess != nil {
			onProcess(s.process(r))
		}
	})
	s.quiet = came == 0 && s.tracer.QueriesBacklog() < quietBacklog
	if time.Since(s.folded) >= time.Second {
		s.folded = time.Now()
		for _, t := range s.current {
			t.tick(s, now)
		}
		err = cmp.Or(err, s.foldExited())
	}
	// Forget exited processes a while after their exit (a late record
	// still finds its role), so that connection churn does not grow the cache.
	for pid, x := range s.exited {
		if now.Sub(x.seen) > forgetAfter {
			s.forget(pid)
		}
	}
	return err
}

// forget drops what is kept of an exited process: after forgetAfter, or
// when its pid is another process's (a pid_max of 32768 goes round in
// minutes on a busy server); the last second of its I/O counters not
// folded yet then goes as the new process's.
func (s *Session) forget(pid uint32) {
	delete(s.procs, pid)
	delete(s.owners, pid)
	delete(s.exited, pid)
	delete(s.statements, pid)
	delete(s.pipelines, pid)
	delete(s.suspended, pid)
}

func (s *Session) process(r *probe.ProcRun) *model.Process {
	p := s.describe(r.Pid)
	user, sys := r.CpuNs, uint64(0)
	if t := r.UtimeNs + r.StimeNs; t > 0 { // the kernel's split, applied to the exact total
		user = uint64(float64(r.CpuNs) * float64(r.UtimeNs) / float64(t))
		sys = r.CpuNs - user
	}
	t := s.tracedOf(r.Instance)
	m := t.about()
	pid, tid := t.unit(r.Pid)
	return &model.Process{
		Type: "process", TS: time.Unix(0, int64(r.StartNs)+int64(s.wallOff)),
		PID: pid, TID: tid, Instance: int(r.Instance), Container: t.container, DataDir: m.DataDir, Port: m.Port,
		Role: string(p.role), Database: p.database, User: p.user,
		ElapsedNs: r.EndNs - r.StartNs, CPUNs: r.CpuNs, CPUUserNs: user, CPUSysNs: sys, RunqNs: r.RunqNs,
		FSTotals: fsTotals(&r.Fs),
	}
}

// tracedOf is the server a record names (its instance); for a process
// traced on its own (Track), s.untraced.
func (s *Session) tracedOf(instance uint32) *traced {
	if t := s.servers[int(instance)]; t != nil {
		return t
	}
	return s.untraced
}

// fsTotals turns the kernel's per-operation counters into the model's.
func fsTotals(fs *[probe.FSAccts]probe.IOAcct) model.FSTotals {
	r, w, y, hit, miss := fs[probe.FSRead], fs[probe.FSWrite], fs[probe.FSSync], fs[probe.FSReadHit], fs[probe.FSReadMiss]
	return model.FSTotals{
		FSReadCount: r.Count, FSReadBytes: r.Bytes, FSReadNs: r.Ns,
		FSWriteCount: w.Count, FSWriteBytes: w.Bytes, FSWriteNs: w.Ns,
		FSSyncCount: y.Count, FSSyncNs: y.Ns,
		FSReadHitCount: hit.Count, FSReadHitNs: hit.Ns,
		FSReadMissCount: miss.Count, FSReadMissNs: miss.Ns,
	}
}

// query turns a record into a model.Query, as the server it names reads
// it; nil for a record sent only to teach what later records need (a
// prepared statement's text, a connection's user).
func (s *Session) query(e *probe.QueryEvent, text []byte) *model.Query {
	t := s.tracedOf(e.Instance)
	q := t.query(s, t, e, text)
	if q == nil {
		return nil
	}
	if e.EmitFlags&uint8(probe.EmitFirst) != 0 {
		s.counted.name(e, q)
	}
	if q.Counted = e.EmitFlags&uint8(probe.EmitCounted) != 0; q.Counted && e.Stmt.Kind == probe.StmtQueryID {
		q.QueryID = queryID(e.Stmt)
	}
	q.Sampled = e.EmitFlags&uint8(probe.EmitSampled) != 0
	if !shown(e) { // it only names its statement's identity
		return nil
	}
	return q
}

// shown says a record is one to show (it met the thresholds, or was drawn
// for a sample); else it is sent to teach Go (a prepared statement, a
// statement identity's name).
func shown(e *probe.QueryEvent) bool {
	return e.EmitFlags&uint8(probe.EmitWanted|probe.EmitSampled) != 0
}

// readWhole says a record is to be read whole: shown, or naming an identity.
func readWhole(e *probe.QueryEvent) bool {
	return shown(e) || e.EmitFlags&uint8(probe.EmitFirst) != 0
}

// statement sets a query's text, normalized in the server's dialect
// unless raw SQL was asked for, and its fingerprint.
func (s *Session) statement(q *model.Query, text []byte, truncated bool, d sqlnorm.Dialect) {
	raw := strings.ToValidUTF8(string(text), "\uFFFD")
	norm, fp := d.Of(raw)
	if norm == "" { // only comments, no literal: what the protocol parsers say they could not name
		norm = strings.TrimSpace(raw)
		h := fnv.New64a()
		h.Write([]byte(norm))
		fp = h.Sum64()
	}
	if s.cfg.RawSQL {
		norm = raw
	}
	q.Query, q.Fingerprint, q.Truncated = norm, fmt.Sprintf("%016x", fp), truncated
	if tc, ok := sqlnorm.TraceParent(raw); ok { // from the raw text: normalizing removed the comment
		q.TraceID, q.ParentSpanID = tc.TraceID, tc.ParentID
	}
}

// accounted is what a query record measured, whichever the database.
func (s *Session) accounted(t *traced, e *probe.QueryEvent) *model.Query {
	a := &e.Acct
	m := t.about()
	q := &model.Query{
		DataDir:       m.DataDir,
		Port:          m.Port,
		Type:          "query",
		TS:            time.Unix(0, int64(e.StartNs)+int64(s.wallOff)),
		PID:           int(e.Tgid),
		Instance:      int(e.Instance),
		System:        strings.ToLower(m.Kind), // "PostgreSQL", "MariaDB", "MySQL": OpenTelemetry's names lowercased
		Container:     t.container,
		QueryNs:       e.EndNs - e.StartNs,
		Statements:    int(e.Statements),
		Failed:        int(e.Failed),
		FSTotals:      fsTotals(&a.Fs),
		BlkCount:      a.Blk[0].Count + a.Blk[1].Count + a.Blk[2].Count,
		BlkBytes:      a.Blk[0].Bytes + a.Blk[1].Bytes + a.Blk[2].Bytes,
		BlkNs:         a.BlkBusyNs,
		BlkReadCount:  a.Blk[probe.BlkRead].Count,
		BlkWriteCount: a.Blk[probe.BlkWrite].Count,
		BlkQueueNs:    a.BlkQueueNs,
		BlkDeviceNs:   a.BlkDeviceNs,

		ReadaheadPages: a.ReadaheadPages,
		PrefetchCount:  a.Prefetch.Count,
		PrefetchBytes:  a.Prefetch.Bytes,
		AIOReadCount:   a.AioRead.Count,
		AIOReadBytes:   a.AioRead.Bytes,
		AIOReadNs:      a.AioRead.Ns,
		SharedHit:      a.SharedHit,
		SharedRead:     a.SharedRead,
	}
	q.FuseCount, q.FuseBytes, q.FuseNs = a.Fuse.Count, a.Fuse.Bytes, a.Fuse.Ns
	q.EngineNs, q.EngineCPUNs, q.EngineBlkCount, q.EngineBlkBytes = a.EngineNs, a.EngineCpuNs, a.EngineBlk.Count, a.EngineBlk.Bytes
	if a.EngineTgid != 0 {
		q.EnginePID = int(a.EngineTgid)
	}
	if a.EngineFs[probe.FSRead].Count+a.EngineFs[probe.FSWrite].Count+a.EngineFs[probe.FSSync].Count > 0 {
		fs := fsTotals(&a.EngineFs)
		q.EngineFS = &fs
	}
	for _, b := range s.boxes {
		*b.of(q) = a.BoxNs[b.kernel]
	}
	q.RunqEngineNs, q.RunqWaits = a.RunqEngineNs, a.RunqWaits
	q.Waits = s.waits(t, e)
	q.UnaccountedNs = q.Unaccounted()
	return q
}

// application makes the name a client gave itself (bytes up to a NUL)
// one every output can show: valid UTF-8, control characters as '?' (as
// PostgreSQL shows them), at most model.ApplicationMax bytes, cut on a
// character boundary.
func application(raw []byte) string {
	if i := bytes.IndexByte(raw, 0); i >= 0 {
		raw = raw[:i]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(string(raw), "\uFFFD") {
		if r < ' ' || r == 0x7f {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > model.ApplicationMax {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
