package model

import "github.com/dbiolat/dbiolat/internal/hist"

// The catalog: every drop counter, histogram and waterfall box dbiolat
// shows, each described once, in the order outputs show them. Every
// output loops over these lists; none lists them again.
//
// The kernel side names the same things in internal/probe/bpf/dbiolat.h
// (enum stat_id, hist_id and box): STAT_RINGBUF_FULL is the counter
// "ringbuf_full", HIST_FS_READ the histogram "fs_read", BOX_IO_WAIT the
// box "io_wait_ns". A test checks the two agree, and another that the
// docs/json.md's tables are these lists (TestDocTablesAreTheCatalog).

// Counter is one count of something that did not go as planned.
type Counter struct {
	Name string // JSON name in "drops"
	// Loss: records or events are missing from the output (Drops.Lost).
	// Else a note: something seen but not charged where it might be.
	Loss bool
	// Kernel: counted in the kernel (STAT_<NAME>); else by the session.
	Kernel bool
	Text   string // what a count of it is, after the number in a summary
}

// Counters are the drop counters, the losses first.
var Counters = []Counter{
	{"ringbuf_full", true, true, "query records (ring buffer full)"},
	{"threads_full", true, true, "threads not traced (map full)"},
	{"inflight_full", true, true, "block requests not followed (map full)"},
	{"proc_totals_full", true, true, "per-process counters (map full)"},
	{"blk_totals_full", true, true, "per-device counters (map full)"},
	{"query_text_fault", true, true, "query texts unreadable"},
	{"usdt_arg_fault", true, true, "USDT arguments undecodable"},
	{"waterfall_full", true, true, "queries without a waterfall (task storage full)"},
	{"proc_runs_full", true, true, "process records (ring buffer full)"},
	{"wire_encrypted", true, true, "encrypted connections whose queries are not seen (GSS, or TLS without OpenSSL; --usdt sees their simple queries)"},
	{"wire_unreadable", true, true, "client messages unreadable"},
	{"wire_unseen", true, true, "pipelined round trips not seen"},
	{"wire_unwalked", true, true, "round trips of several statements whose replies could not be walked (their statements counted as one)"},
	{"wire_uncaptured", true, true, "reads of pipelines' requests not captured whole (statements in them may be named by their place only)"},
	{"wire_unnamed", true, false, "statements of the records shown named by their place only (no capture held their messages)"},
	{"programs_skipped", true, false, "program runs skipped by the kernel (already running on that CPU)"},
	{"wait_hists_full", true, true, "sleeps left out of the wait event histograms (map full)"},
	{"fuse_full", true, true, "FUSE requests not followed (map full)"},
	{"mysql_conn_full", true, true, "MySQL connections not followed (socket storage or TLS connection map full)"},
	{"unit_hists_full", true, true, "I/O left out of the histograms by server and role (map full; the host's have it)"},
	{"query_unfinished", false, true, "queries started again before finishing"},
	{"blk_merges", false, true, "bios merged into queued requests"},
	{"waterfall_recovered", false, true, "switch-ins of a query not seen, split by the kernel's arrival stamp"},
	{"waterfall_missed", false, true, "context switches of a query not seen (the time since shows as unaccounted)"},
	{"runq_unknown", false, true, "wakes of a query whose run-queue wait the kernel's clock did not measure (charged to the sleep before it, not in the run-queue histogram)"},
	{"wire_tls", false, true, "TLS connections read in plaintext at OpenSSL"},
	{"wire_grouped", false, true, "statements timed together with others in one record (a pipeline's whose replies went out in one send, a multi-statement command's)"},
	{"stmts_full", false, true, "queries counted under \"other\", not their statement's identity (the kernel's statement table was full)"},
	{"aio_unseen", false, true, "reads I/O workers or threads performed whose staging was not seen (not charged to a query)"},
	{"fuse_unseen", false, true, "FUSE requests a storage engine took that no traced process sent (not charged to a query)"},
	{"mysql_reply_unseen", false, true, "MySQL replies whose end was not recognized (their query ended at the next command)"},
	{"query_cut", false, true, "queries that crossed a pause of tracing (serve's duty cycles), left out rather than measured in part"},
	{"blk_unseen", false, true, "block requests not seen whole: in flight when the trace attached, or done after a duty cycle's window closed"},
	{"blk_late", false, true, "block requests still in flight when their query ended (counted in it, their time not)"},
}

// Histogram is one of the log2 histograms kept in the kernel.
type Histogram struct {
	Name string    // JSON name in "hists"
	Unit hist.Unit // nanoseconds, or bytes
	// ByRole: kept per process (or MySQL thread) too, so that serve
	// splits it by server, database and role (Interval.RoleHists).
	ByRole bool
	Title  string // a heading
	Source string // where its numbers come from, for a reader who checks them
}

// Histograms are the histograms down the stack: query, scheduler, file
// system, block device.
var Histograms = []Histogram{
	{"query", hist.Time, false, "query latency",
		"Each finished query, from the first message its backend read to the ReadyForQuery it sent (or, with --usdt, from the USDT probe postgresql:query__start to query__done): every query seen, recorded or not."},
	{"runq", hist.Time, false, "run-queue waits of queries (runnable, waiting for a CPU)",
		"Each time a backend in a query was runnable but waited for a CPU (preempted, or woken and not yet running), from tp_btf/sched_switch and the time the kernel queued it (sched_info.last_queued), in the run queue's clock. A wake whose wait that clock did not measure (it skips its update when the wake preempts the CPU's task) is left out and counted in the drops' runq_unknown."},
	{"lock", hist.Time, false, "lock waits of queries (asleep on a lock or LWLock)",
		"Each sleep of a backend in a query on a lock, timed by sched_switch: in PostgreSQL, one under a wait event of the Lock or LWLock class (read from the backend's memory at the switch-out; without one, inside the lock__wait or lwlock__wait USDT probes where the server has them); in MySQL and MariaDB, one inside thd_wait_begin/end for a row, table, metadata, global or user lock."},
	{"fs_read", hist.Time, true, "file system read latency (read and pread syscalls)",
		"Time of read, readv, pread64, preadv and preadv2 syscalls on regular files and block devices by the traced processes, from the syscalls:sys_enter_/sys_exit_ tracepoints (--fs): the time track_io_timing measures around the same calls."},
	{"fs_read_hit", hist.Time, true, "file system reads served by the page cache",
		"The reads of the traced processes that, during the call, neither slept (a voluntary context switch), nor started block requests, nor triggered readahead. With fs_read_miss, every read of fs_read, once."},
	{"fs_read_miss", hist.Time, true, "file system reads that missed the page cache (waited for or started I/O)",
		"The reads of the traced processes that, during the call, slept (waiting for a page being read, or for the FUSE daemon serving the file), started block requests or triggered readahead."},
	{"fuse", hist.Time, false, "FUSE request latency (a userspace storage engine's answers)",
		"Each request the traced processes sent to the FUSE daemon serving their files (a storage engine: bindfs, a Longhorn-like engine), from the tracepoint fuse:fuse_request_send in the sender to fuse:fuse_request_end, as the daemon answers: the layer under a FUSE file system's reads and writes."},
	{"fs_write", hist.Time, true, "file system write latency (write and pwrite syscalls)",
		"Time of write, writev, pwrite64, pwritev and pwritev2 syscalls on regular files and block devices by the traced processes, from the syscalls:sys_enter_/sys_exit_ tracepoints (--fs)."},
	{"fs_sync", hist.Time, true, "file system sync latency (fsync, fdatasync, sync_file_range)",
		"Time of fsync, fdatasync and sync_file_range syscalls by the traced processes, from the syscalls:sys_enter_/sys_exit_ tracepoints (--fs)."},
	{"blk_read", hist.Time, true, "block device read latency (request start to completion)",
		"Block request latency from tp_btf/block_io_start (in the submitting task) to block_io_done, for read requests the traced processes submitted; kernel threads' (writeback) and other processes' requests are not in it."},
	{"blk_write", hist.Time, true, "block device write latency",
		"Block request latency from tp_btf/block_io_start to block_io_done, for write requests the traced processes submitted; writeback by kernel threads is not in it."},
	{"blk_other", hist.Time, true, "block device flush/discard latency",
		"Block request latency from tp_btf/block_io_start to block_io_done of requests without data (cache flushes) and discards the traced processes submitted."},
	{"blk_read_size", hist.Bytes, true, "block read request sizes",
		"Each read request's size (__data_len) at tp_btf/block_io_start, for requests the traced processes submitted: merged bios make larger requests."},
	{"blk_write_size", hist.Bytes, true, "block write request sizes",
		"Each write request's size (__data_len) at tp_btf/block_io_start, for requests the traced processes submitted."},
}

// HistogramOf returns the catalog entry of a histogram by name.
func HistogramOf(name string) (Histogram, bool) {
	for _, h := range Histograms {
		if h.Name == name {
			return h, true
		}
	}
	return Histogram{}, false
}

// Box is one box of the waterfall: with the others it partitions a
// query's time.
type Box struct {
	Name   string // JSON name in a query record
	Short  string // in a slow-log line
	Title  string // in a tree
	Detail string // what the box holds, when the title does not say
	Color  string // in the HTML plots (distinctive: the tests look for it)
	// Kernel: measured in the kernel (BOX_<NAME without _ns>); else the
	// rest no other box explains.
	Kernel bool
	Of     func(*Query) *uint64 // the field of a query that holds it
}

// Boxes are the waterfall's boxes, on CPU first and the unexplained rest last.
var Boxes = []Box{
	{"cpu_ns", "cpu", "on CPU", "", "#4daf4a", true, func(q *Query) *uint64 { return &q.CPUNs }},
	{"runq_ns", "runq", "run-queue wait", "runnable, waiting for a CPU", "#ffd92f", true, func(q *Query) *uint64 { return &q.RunqNs }},
	{"io_wait_ns", "io wait", "I/O wait", "asleep on an IO wait event, in a file system call or in the kernel's I/O wait", "#e41a1c", true, func(q *Query) *uint64 { return &q.IOWaitNs }},
	{"aio_wait_ns", "aio wait", "async I/O wait", "asleep until I/O another process or thread does for it completes (PostgreSQL 18's I/O workers, InnoDB's read I/O threads)", "#1f78b4", true, func(q *Query) *uint64 { return &q.AIOWaitNs }},
	{"lock_ns", "lock", "lock wait", "asleep on a heavyweight lock (a Lock wait event)", "#984ea3", true, func(q *Query) *uint64 { return &q.LockNs }},
	{"lwlock_ns", "lwlock", "LWLock wait", "asleep on an LWLock (and from PostgreSQL 19 on a buffer content lock, Buffer/BufferShared...: LWLock/BufferContent until 18)", "#f781bf", true, func(q *Query) *uint64 { return &q.LWLockNs }},
	{"other_wait_ns", "other wait", "other wait", "any other wait event (IPC, Timeout, Client...) or none", "#a6761d", true, func(q *Query) *uint64 { return &q.OtherWaitNs }},
	{"unaccounted_ns", "unaccounted", "unaccounted", "what no box explains", "#cccccc", false, func(q *Query) *uint64 { return &q.UnaccountedNs }},
}

// Field is one field of a query record beside its waterfall's boxes, as
// an OpenTelemetry export (serve --otlp) carries it: under its JSON name
// after "dbiolat." (OTLPName), so that JSON and OTLP cannot drift. The
// fields OpenTelemetry's semantic conventions name (database, user,
// client, text...) are exported under those names instead (internal/otlp).
type Field struct {
	Name string // JSON name in a query record
	Text string // what it holds, in the attributes' table
	// Optional: left out when zero, as JSON leaves it out (omitempty).
	Optional bool
	// Value is the field's value: a uint64, int, uint32, string, bool, or
	// for waits a map of nanoseconds by wait event.
	Value func(*Query) any
}

// OTLPName is the OpenTelemetry attribute name of a query record's field,
// box or wait event map: its JSON name under "dbiolat.".
func OTLPName(jsonName string) string { return "dbiolat." + jsonName }

// Fields are dbiolat's own fields of a query record, in the order of
// docs/json.md: who ran it, then its figures layer by layer.
var Fields = []Field{
	{"fingerprint", "the normalized query's fingerprint (16 hex digits)", false, func(q *Query) any { return q.Fingerprint }},
	{"query_truncated", "true when the text was cut at 4 KiB", true, func(q *Query) any { return q.Truncated }},
	{"role", "the process's role (client backend, connection...)", false, func(q *Query) any { return q.Role }},
	{"application", "the application that sent it: PostgreSQL's application_name, MariaDB's program_name", true, func(q *Query) any { return q.Application }},
	{"via", "the connection pooler it came through (pgbouncer pid N): the client fields are then the client it forwarded it for", true, func(q *Query) any { return q.Via }},
	{"client_pid", "behind a pooler, the process of a client connected over a unix socket", true, func(q *Query) any { return q.ClientPID }},
	{"instance", "the server's PID (PostgreSQL's postmaster)", false, func(q *Query) any { return q.Instance }},
	{"data_dir", "the server's data directory", false, func(q *Query) any { return q.DataDir }},
	{"tid", "a MySQL server's thread that ran it", true, func(q *Query) any { return q.TID }},
	{"connection_id", "a MySQL connection's id, as SHOW PROCESSLIST shows it", true, func(q *Query) any { return q.ConnectionID }},
	{"query_ns", "the query's time", false, func(q *Query) any { return q.QueryNs }},
	{"statements", "statements the record holds (a pipeline's, a multi-statement query's)", false, func(q *Query) any { return q.Statements }},
	{"failed", "of them, those that ended in an error", true, func(q *Query) any { return q.Failed }},
	{"portals_ended", "its statements are portals earlier records left suspended, ended now (their time is in those records)", true, func(q *Query) any { return q.PortalsEnded }},
	{"earlier_ns", "the time of its statements' earlier parts, in earlier records (portals suspended at their row limit)", true, func(q *Query) any { return q.EarlierNs }},
	{"waits", "time asleep by wait event, one attribute per event: dbiolat.waits.IO/DataFileRead", true, func(q *Query) any { return q.Waits }},
	{"fs_read_count", "file system reads (--fs)", false, func(q *Query) any { return q.FSReadCount }},
	{"fs_read_bytes", "bytes they read", false, func(q *Query) any { return q.FSReadBytes }},
	{"fs_read_ns", "their time", false, func(q *Query) any { return q.FSReadNs }},
	{"fs_read_hit_count", "of them, served by the page cache", false, func(q *Query) any { return q.FSReadHitCount }},
	{"fs_read_hit_ns", "their time", false, func(q *Query) any { return q.FSReadHitNs }},
	{"fs_read_miss_count", "of them, missed the page cache", false, func(q *Query) any { return q.FSReadMissCount }},
	{"fs_read_miss_ns", "their time", false, func(q *Query) any { return q.FSReadMissNs }},
	{"fs_write_count", "file system writes (--fs)", false, func(q *Query) any { return q.FSWriteCount }},
	{"fs_write_bytes", "bytes they wrote", false, func(q *Query) any { return q.FSWriteBytes }},
	{"fs_write_ns", "their time", false, func(q *Query) any { return q.FSWriteNs }},
	{"fs_sync_count", "file system syncs (--fs)", false, func(q *Query) any { return q.FSSyncCount }},
	{"fs_sync_ns", "their time", false, func(q *Query) any { return q.FSSyncNs }},
	{"readahead_pages", "pages the kernel read ahead for it", false, func(q *Query) any { return q.ReadaheadPages }},
	{"prefetch_count", "read-ahead advice calls (posix_fadvise WILLNEED)", false, func(q *Query) any { return q.PrefetchCount }},
	{"prefetch_bytes", "bytes they advised", false, func(q *Query) any { return q.PrefetchBytes }},
	{"blk_count", "block requests it started", false, func(q *Query) any { return q.BlkCount }},
	{"blk_bytes", "their bytes", false, func(q *Query) any { return q.BlkBytes }},
	{"blk_ns", "wall time with at least one in flight", false, func(q *Query) any { return q.BlkNs }},
	{"blk_read_count", "of them, reads", false, func(q *Query) any { return q.BlkReadCount }},
	{"blk_write_count", "of them, writes", false, func(q *Query) any { return q.BlkWriteCount }},
	{"blk_queue_ns", "their time queued, summed", false, func(q *Query) any { return q.BlkQueueNs }},
	{"blk_device_ns", "their time on the device, summed", false, func(q *Query) any { return q.BlkDeviceNs }},
	{"aio_read_count", "reads another process or thread performed for it (PostgreSQL 18's I/O workers, InnoDB's read I/O threads)", false, func(q *Query) any { return q.AIOReadCount }},
	{"aio_read_bytes", "their bytes", false, func(q *Query) any { return q.AIOReadBytes }},
	{"aio_read_ns", "their time", false, func(q *Query) any { return q.AIOReadNs }},
	{"fuse_count", "requests it sent a FUSE daemon (a storage engine)", false, func(q *Query) any { return q.FuseCount }},
	{"fuse_bytes", "bytes it answered", false, func(q *Query) any { return q.FuseBytes }},
	{"fuse_ns", "their time, send to answer", false, func(q *Query) any { return q.FuseNs }},
	{"engine_pid", "the FUSE daemon's PID", true, func(q *Query) any { return q.EnginePID }},
	{"engine_ns", "the engine's time on its requests", false, func(q *Query) any { return q.EngineNs }},
	{"engine_cpu_ns", "of it, on CPU", false, func(q *Query) any { return q.EngineCPUNs }},
	{"runq_waits", "the run-queue waits runq_ns sums (those the kernel's stamp measured)", false, func(q *Query) any { return q.RunqWaits }},
	{"runq_engine_ns", "of the query's run-queue wait, the waits behind the engine's threads (each charged whole to the task that ran last before the query's thread)", false, func(q *Query) any { return q.RunqEngineNs }},
	{"engine_blk_count", "block requests the engine started for it", false, func(q *Query) any { return q.EngineBlkCount }},
	{"engine_blk_bytes", "their bytes", false, func(q *Query) any { return q.EngineBlkBytes }},
	{"shared_hit", "shared buffers found (--buffers)", true, func(q *Query) any { return q.SharedHit }},
	{"shared_read", "shared buffers read in (--buffers)", true, func(q *Query) any { return q.SharedRead }},
}

// OTLPDrop is a reason a query record offered to an OpenTelemetry export
// (--otlp) was not sent; OTLPCount counts them.
type OTLPDrop struct {
	Name string // the reason label of dbiolat_otlp_records_total
	// Loss: a record chosen to be sent is missing; else a choice the
	// options made.
	Loss bool
	Text string // what a count of it is, after the number in a summary
}

// OTLPDrops are the reasons, in the order a record meets them.
var OTLPDrops = []OTLPDrop{
	{"not_sampled", false, "under --otlp-threshold and not drawn by --otlp-sample"},
	{"rate_limited", false, "over --otlp-rate"},
	{"queue_full", true, "the queue to the collector full: it is slow or down"},
	{"export_failed", true, "not taken by the collector, retries included, or not flushed in time at exit"},
}

// OTLPSignals are the kinds of records an OpenTelemetry export sends
// for each query chosen: a log record, and a trace (a span and its boxes).
var OTLPSignals = []string{"logs", "traces"}
