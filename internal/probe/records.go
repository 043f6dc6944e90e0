package probe

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// ReadQueries waits until the deadline, then delivers the records the
// ring buffer holds, calling fn for each. The kernel side never wakes us
// (its records are submitted without a wakeup), so the caller calls this
// on a timer. The wait is a timer's, not the ring buffer's epoll: a
// goroutine blocked in a system call for more than 10 ms has the Go
// runtime's sysmon take its P away and then check again every 20 µs
// (serve beside 40,000 queries a second: 8.3 ms of CPU a second with
// those wakeups, 6.1 without).
func (t *Tracer) ReadQueries(deadline time.Time, fn func(e *QueryEvent, text []byte)) error {
	time.Sleep(time.Until(deadline))
	t.backlog = float64(t.events.AvailableBytes()) / float64(t.events.BufferSize())
	t.events.SetDeadline(time.Now()) // what is there, without waiting
	var rec ringbuf.Record
	var e QueryEvent
	const hdr = int(unsafe.Offsetof(e.Text))
	for {
		if err := t.events.ReadInto(&rec); err != nil {
			if drained(err) {
				return nil
			}
			return fmt.Errorf("reading query records: %w", err)
		}
		if len(rec.RawSample) < hdr {
			continue
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&e)), hdr), rec.RawSample[:hdr])
		text := rec.RawSample[hdr:]
		if int(e.TextLen) < len(text) {
			text = text[:e.TextLen]
		}
		fn(&e, text)
	}
}

// QueriesBacklog is the share of the query ring buffer the last
// ReadQueries found filled: what waiting longer before the next would
// risk (a full ring buffer drops records, counted: STAT_RINGBUF_FULL).
func (t *Tracer) QueriesBacklog() float64 { return t.backlog }

// ReadProcRuns delivers the records of traced processes that exited since
// the last call, without waiting.
func (t *Tracer) ReadProcRuns(fn func(r *ProcRun)) error {
	t.runs.SetDeadline(time.Now())
	var rec ringbuf.Record
	var r ProcRun
	for {
		if err := t.runs.ReadInto(&rec); err != nil {
			if drained(err) {
				return nil
			}
			return fmt.Errorf("reading process records: %w", err)
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(r)) {
			continue
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r)), rec.RawSample)
		fn(&r)
	}
}

// drained says a read ended because nothing more was there by the deadline.
func drained(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed)
}
