package probe

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// ReadQueries drains the ring buffer until it is empty or the deadline
// passes, calling fn for each record. The kernel side never wakes us, so
// the caller calls this on a timer.
func (t *Tracer) ReadQueries(deadline time.Time, fn func(e *QueryEvent, text []byte)) error {
	// The ring buffer's reader waits in whole milliseconds, rounded down:
	// less than one before the deadline it does not wait at all, and a
	// caller polling until the deadline spun there (serve, idle: 2,268
	// polls a second instead of 10, half its CPU). A millisecond more.
	t.events.SetDeadline(deadline.Add(time.Millisecond))
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
