// Package model holds the user-facing records every output reads. Their
// JSON field names are a documented interface (docs/json.md):
// add fields, never rename them.
package model

import (
	"encoding/json"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/hist"
)

// Query is one finished query and what it spent, from the kernel's view.
type Query struct {
	Type     string    `json:"type"` // "query"
	TS       time.Time `json:"ts"`   // when the query started
	PID      int       `json:"pid"`
	Instance int       `json:"instance"` // the server's PID (PostgreSQL's postmaster)
	// The server's database system, as OpenTelemetry names it
	// (db.system.name): "postgresql", "mariadb" or "mysql".
	System string `json:"system"`
	// The container (and Kubernetes pod) the server runs in; absent on the host.
	Container  *container.Info `json:"container,omitempty"`
	DataDir    string          `json:"data_dir"` // the instance's data directory...
	Port       int             `json:"port"`     // ...and port
	Role       string          `json:"role"`
	Database   string          `json:"database"`
	User       string          `json:"user"`
	ClientAddr string          `json:"client_addr,omitempty"` // a TCP client's address; absent over a unix socket
	ClientPort int             `json:"client_port,omitempty"`
	// Behind a connection pooler: the pooler the query came through
	// ("pgbouncer pid 1234"); ClientAddr and ClientPort are then the
	// client connection it forwarded the query for (absent when that could
	// not be told), and ClientPID a unix-socket client's process.
	Via       string `json:"via,omitempty"`
	ClientPID int    `json:"client_pid,omitempty"`
	// The application that sent it, as its client named itself: PostgreSQL's
	// application_name when the query ended, MySQL's program_name
	// connection attribute; absent when none is known. At most
	// ApplicationMax bytes of valid UTF-8, no control characters.
	Application string `json:"application,omitempty"`
	// A MySQL server's: the thread that ran the query, and the connection's
	// id as SHOW PROCESSLIST shows it (absent for a connection older than
	// the trace).
	TID          int    `json:"tid,omitempty"`
	ConnectionID uint32 `json:"connection_id,omitempty"`
	Fingerprint  string `json:"fingerprint"` // 16 hex digits, stable across runs
	// QueryID is PostgreSQL's query id of the statement, as
	// pg_stat_statements' queryid and pg_stat_activity's query_id show it
	// (a signed 64-bit number): the key to join them. Absent when the
	// server computes none (compute_query_id off), for MySQL, for a record
	// that is not the only statement of its round trip (a pipeline's, a
	// multi-statement Query's: the server keeps one id per backend), or
	// where the version's layout is not known.
	QueryID   int64  `json:"queryid,omitempty"`
	Query     string `json:"query"` // normalized unless --raw-sql
	Truncated bool   `json:"query_truncated,omitempty"`
	// The application's trace context, from a W3C traceparent in a
	// sqlcommenter comment of the query's text (sqlnorm.TraceParent):
	// its trace and the span that sent the query. Absent without one, or
	// when the comment lay past the text captured (4 KiB).
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`

	QueryNs uint64 `json:"query_ns"`
	// Statements the record holds: 1, but for a PostgreSQL pipeline or
	// batch whose statements' replies went out together (they share its
	// time: the kernel saw no boundary between them), a simple Query
	// holding several statements, or 0 for a portal suspended at its row
	// limit (its statement goes on in a later record, as pg_stat_statements
	// counts it) or a round trip that ran none. Failed of them ended in an
	// error (pg_stat_statements counts only the others).
	Statements int `json:"statements"`
	Failed     int `json:"failed,omitempty"`
	// PortalsEnded: its statements are PostgreSQL portals that earlier
	// records left suspended ("in part"), ended by this round trip (a
	// Close, a new unnamed portal, the commit): their time is in those
	// records, not in this one's.
	PortalsEnded int `json:"portals_ended,omitempty"`
	// EarlierNs: the time of its statements' earlier parts, which earlier
	// records held (their portals were suspended at their row limit): a
	// statement's latency is QueryNs + EarlierNs; the time of this record
	// alone is QueryNs.
	EarlierNs uint64 `json:"earlier_ns,omitempty"`

	FSTotals

	// Block requests the query (or its parallel workers) started.
	BlkCount      uint64 `json:"blk_count"`
	BlkBytes      uint64 `json:"blk_bytes"`
	BlkNs         uint64 `json:"blk_ns"` // wall time with at least one of them in flight
	BlkReadCount  uint64 `json:"blk_read_count"`
	BlkWriteCount uint64 `json:"blk_write_count"`
	BlkQueueNs    uint64 `json:"blk_queue_ns"`  // summed over those that completed within the query
	BlkDeviceNs   uint64 `json:"blk_device_ns"` // summed over those that completed within the query

	// The waterfall: they add up to QueryNs (catalog: Boxes).
	CPUNs         uint64 `json:"cpu_ns"`
	RunqNs        uint64 `json:"runq_ns"`
	IOWaitNs      uint64 `json:"io_wait_ns"`
	AIOWaitNs     uint64 `json:"aio_wait_ns"`
	LockNs        uint64 `json:"lock_ns"`
	LWLockNs      uint64 `json:"lwlock_ns"`
	OtherWaitNs   uint64 `json:"other_wait_ns"`
	UnaccountedNs uint64 `json:"unaccounted_ns"`
	// Waits is the time asleep by the wait event the database named, as
	// pg_stat_activity names it ("IO/DataFileRead"); the most named per
	// query are kept, the rest summed as OtherWaitEvents.
	Waits map[string]uint64 `json:"waits,omitempty"`

	ReadaheadPages uint64 `json:"readahead_pages"`
	PrefetchCount  uint64 `json:"prefetch_count"` // read-ahead advice calls (posix_fadvise WILLNEED)
	PrefetchBytes  uint64 `json:"prefetch_bytes"` // bytes they advised
	// Reads another process performed for the query (PostgreSQL 18's I/O
	// workers): their I/Os, bytes and time. Their file system and block
	// I/O is in the fields above too, done for it.
	AIOReadCount uint64 `json:"aio_read_count"`
	AIOReadBytes uint64 `json:"aio_read_bytes"`
	AIOReadNs    uint64 `json:"aio_read_ns"`
	// A userspace storage engine (a FUSE daemon) serving the query's files:
	// the requests the query sent it, and, with --fs, the work the engine
	// did for them, its block requests being also in the blk fields.
	FuseCount   uint64 `json:"fuse_count"` // requests sent to the FUSE daemon
	FuseBytes   uint64 `json:"fuse_bytes"` // bytes it answered
	FuseNs      uint64 `json:"fuse_ns"`    // send to answer, summed over the requests
	EnginePID   int    `json:"engine_pid,omitempty"`
	EngineNs    uint64 `json:"engine_ns"`     // the engine's time on them: taking each request to answering
	EngineCPUNs uint64 `json:"engine_cpu_ns"` // of engine_ns, the engine's time on CPU
	// RunqEngineNs is, of RunqNs, the waits behind a storage engine's
	// thread: those that ended when one left the CPU to the query's
	// thread, each charged whole to it (every mode, not only --fs).
	RunqEngineNs   uint64    `json:"runq_engine_ns"`
	RunqWaits      uint64    `json:"runq_waits"`          // how many waits RunqNs sums (those measured)
	EngineFS       *FSTotals `json:"engine_fs,omitempty"` // the engine's file system calls for it
	EngineBlkCount uint64    `json:"engine_blk_count"`    // of blk_count: requests the engine started for it
	EngineBlkBytes uint64    `json:"engine_blk_bytes"`
	SharedHit      uint64    `json:"shared_hit,omitempty"`  // shared buffers found (--buffers only)
	SharedRead     uint64    `json:"shared_read,omitempty"` // shared buffers read in (--buffers only)

	// Counted: the kernel counted its statements under their identity
	// (serve, top: StatementCounts has them), so whoever sums queries
	// must not count this record again. Sampled: the kernel drew it at
	// random for the OpenTelemetry export's sample.
	Counted bool `json:"-"`
	Sampled bool `json:"-"`
}

// StatementCounts are what the kernel counted of one statement identity
// (PostgreSQL's query id in a database, from an application) over a
// while: Sums is a record of all its statements (Statements: how many,
// QueryNs, the boxes, file system and block figures: their sums),
// labelled as the record that named the identity; Latencies are the
// statements' latencies.
type StatementCounts struct {
	Sums      *Query
	Latencies *hist.Hist
}

// BackendCounts are what the kernel counted of one PostgreSQL backend
// over a while, without a record per query (top, when the kernel counts
// queries by statement identity): the queries it began, its file system
// calls and the block requests it started, and the time of the queries
// it ended.
type BackendCounts struct {
	PID      int
	Role     string
	Database string
	User     string
	Queries  uint64 // queries begun
	// Time: the time (QueryNs) and waterfall boxes of the queries it
	// ended, measured whole.
	Time     *Query
	FSCount  uint64 // file system calls (reads, writes, syncs)
	BlkCount uint64 // block requests started
}

// OtherFingerprint labels queries counted together, without their
// statement's identity (a bound was reached); UnnamedFingerprint those of
// an identity no record named (the record was lost: drops say why).
const (
	OtherFingerprint   = "other"
	UnnamedFingerprint = "unnamed"
)

// RunqEngineMeta is the key of a recording's meta fact that says its
// queries carry RunqEngineNs: a recording made before it was measured
// lacks the fact, and its zeros are not measures.
const RunqEngineMeta = "runq_engine_ns"

// ApplicationMax bounds an application name in bytes: PostgreSQL's
// NAMEDATALEN less its NUL, as pg_stat_activity shows it.
const ApplicationMax = 63

// Accounted is the sum of the waterfall's measured boxes.
func (q *Query) Accounted() uint64 {
	var sum uint64
	for _, b := range Boxes {
		if b.Kernel {
			sum += *b.Of(q)
		}
	}
	return sum
}

// Unaccounted is the query time no box explains (0 when the boxes, read
// from another clock path, slightly exceed it).
func (q *Query) Unaccounted() uint64 {
	if a := q.Accounted(); a < q.QueryNs {
		return q.QueryNs - a
	}
	return 0
}

// FSTotals is what a query or a process did through file system calls.
// Embedded, its fields appear flat in JSON.
type FSTotals struct {
	FSReadCount  uint64 `json:"fs_read_count"`
	FSReadBytes  uint64 `json:"fs_read_bytes"`
	FSReadNs     uint64 `json:"fs_read_ns"`
	FSWriteCount uint64 `json:"fs_write_count"`
	FSWriteBytes uint64 `json:"fs_write_bytes"`
	FSWriteNs    uint64 `json:"fs_write_ns"`
	FSSyncCount  uint64 `json:"fs_sync_count"`
	FSSyncNs     uint64 `json:"fs_sync_ns"`
	// The reads again, split by the page cache: hits + misses = reads.
	FSReadHitCount  uint64 `json:"fs_read_hit_count"` // served by the page cache
	FSReadHitNs     uint64 `json:"fs_read_hit_ns"`
	FSReadMissCount uint64 `json:"fs_read_miss_count"` // slept, or started block I/O or readahead
	FSReadMissNs    uint64 `json:"fs_read_miss_ns"`
}

// FSNs is the time in file system calls of any kind.
func (f *FSTotals) FSNs() uint64 { return f.FSReadNs + f.FSWriteNs + f.FSSyncNs }

// FSCount is the number of file system calls.
func (f *FSTotals) FSCount() uint64 { return f.FSReadCount + f.FSWriteCount + f.FSSyncCount }

// Process is the whole run of a traced process that exited: an autovacuum
// worker's, a parallel worker's, a connection's. For background work it is
// the log line the pgsql-hackers thread on analyze asked for: elapsed vs
// CPU vs read and write time.
type Process struct {
	Type      string          `json:"type"` // "process"
	TS        time.Time       `json:"ts"`   // when it started
	PID       int             `json:"pid"`
	TID       int             `json:"tid,omitempty"` // a MySQL server's thread: each has its own role and record
	Instance  int             `json:"instance"`
	Container *container.Info `json:"container,omitempty"` // as Query's
	DataDir   string          `json:"data_dir"`
	Port      int             `json:"port"`
	Role      string          `json:"role"`
	Database  string          `json:"database"`
	User      string          `json:"user"`
	ElapsedNs uint64          `json:"elapsed_ns"`
	CPUNs     uint64          `json:"cpu_ns"`
	CPUUserNs uint64          `json:"cpu_user_ns"`
	CPUSysNs  uint64          `json:"cpu_sys_ns"`
	RunqNs    uint64          `json:"runq_ns"` // runnable, waiting for a CPU

	FSTotals
}

// Drops counts what the kernel side could not deliver or attribute, by
// counter name (catalog: Counters). Every command prints it; a non-zero
// value is never hidden.
type Drops map[string]uint64

// Lost is the number of records or events that are missing from the output.
func (d Drops) Lost() uint64 {
	var n uint64
	for _, c := range Counters {
		if c.Loss {
			n += d[c.Name]
		}
	}
	return n
}

// Of is one counter by name; a name not in the catalog is a bug.
func (d Drops) Of(name string) uint64 {
	for _, c := range Counters {
		if c.Name == name {
			return d[name]
		}
	}
	panic("no drop counter " + name)
}

// OtherWaitEvents names, in Query.Waits, the time of the wait events
// beyond the ones a query keeps by name.
const OtherWaitEvents = "other wait events"

// Hists is one set of latency histograms (nanoseconds).
type Hists map[string]*hist.Hist

// Rate is one row of an interval: I/O per second of one role on one layer
// and device.
type Rate struct {
	Layer string `json:"layer"` // "fs" or "blk"
	// The server (ServerName) and database of the processes that did the
	// I/O, when rows are split by them (dbiolat serve); "" for background
	// processes' database, and for I/O not ours.
	Server     string  `json:"server,omitempty"`
	Database   string  `json:"database,omitempty"`
	Role       string  `json:"role"`   // a PostgreSQL role, or "kernel" / "other process" for block I/O not ours
	Device     string  `json:"device"` // block device name; "" for fs
	ReadOps    float64 `json:"read_ops"`
	ReadBytes  float64 `json:"read_bytes"`
	WriteOps   float64 `json:"write_ops"`
	WriteBytes float64 `json:"write_bytes"`
	SyncOps    float64 `json:"sync_ops,omitempty"`  // fs only
	OtherOps   float64 `json:"other_ops,omitempty"` // blk only: flushes, discards
	AvgNs      float64 `json:"avg_ns"`              // mean latency of the interval's operations
}

// Interval is what one reporting interval saw.
type Interval struct {
	Type    string    `json:"type"` // "interval"
	TS      time.Time `json:"ts"`   // end of the interval
	Seconds float64   `json:"seconds"`
	Rates   []Rate    `json:"rates,omitempty"`
	Hists   Hists     `json:"hists,omitempty"`
	// WaitHists: the sleeps of queries by wait event (names as Query.Waits).
	WaitHists Hists `json:"wait_hists,omitempty"`
	// RoleHists: the interval's file system and block histograms (the
	// catalog's ByRole ones) by server, database and role, when rows are
	// split by them (dbiolat serve).
	RoleHists []RoleHists `json:"role_hists,omitempty"`
	Queries   uint64      `json:"queries"`
	// Records: the query records the kernel sent to user space meanwhile
	// (when it counts statements, only those chosen, naming an identity,
	// or that no identity counts: what tracing costs in user space).
	Records uint64 `json:"records"`
	Drops   Drops  `json:"drops"`
}

// RoleHists are the histograms of the I/O one role of a server's database
// did in an interval (Rate's Server, Database and Role).
type RoleHists struct {
	Server   string `json:"server,omitempty"`
	Database string `json:"database,omitempty"`
	Role     string `json:"role"`
	Hists    Hists  `json:"hists"`
}

// Summary closes every command's output.
type Summary struct {
	Type      string   `json:"type"` // "summary"
	Seconds   float64  `json:"seconds"`
	Instances []int    `json:"instances"` // the servers traced: PostgreSQL's postmasters', MySQL servers' PIDs
	Queries   uint64   `json:"queries"`   // queries seen
	Reported  uint64   `json:"reported"`  // queries printed (slowlog), or kept (record)
	Traced    []string `json:"traced"`    // probe families on: wire or usdt (query boundaries), fs, block, sched, buffers
	Hists     Hists    `json:"hists,omitempty"`
	WaitHists Hists    `json:"wait_hists,omitempty"` // as Interval's
	Drops     Drops    `json:"drops"`
	Cost      *Cost    `json:"cost,omitempty"`
	// OTLP: what became of the query records offered to an OpenTelemetry
	// export (--otlp), absent without one.
	OTLP []OTLPCount `json:"otlp,omitempty"`
}

// OTLPCount is how many query records offered to an OpenTelemetry export
// met one outcome, in one signal (catalog: OTLPSignals).
type OTLPCount struct {
	Signal  string `json:"signal"`  // "logs" or "traces"
	Outcome string `json:"outcome"` // "sent", or the reason it was dropped (catalog: OTLPDrops)
	Count   uint64 `json:"count"`
}

// Cost is what dbiolat itself cost while it ran: its BPF programs, which
// run in the traced processes' time, and its own process. The kernel
// counts BPF run time only in sampled windows (counting costs much on a
// VM), so the BPF figures are rates over those windows.
type Cost struct {
	BPFSampledSeconds float64       `json:"bpf_sampled_seconds"` // 0: the kernel did not count
	BPFRunsPerSec     float64       `json:"bpf_runs_per_sec"`    // program runs: events handled in the kernel
	BPFCPUPerSec      float64       `json:"bpf_cpu_per_sec"`     // seconds of CPU in our programs per second
	Programs          []ProgramCost `json:"programs,omitempty"`  // in the windows, most run time first
	BPFMapBytes       uint64        `json:"bpf_map_bytes"`       // kernel memory of the maps, fixed at load
	CPUNs             uint64        `json:"cpu_ns"`              // dbiolat's own user and system CPU
	MaxRSSBytes       uint64        `json:"max_rss_bytes"`       // dbiolat's peak resident memory
}

// ProgramCost is one BPF program's share of the cost.
type ProgramCost struct {
	Name  string `json:"name"`
	Runs  uint64 `json:"runs"`
	RunNs uint64 `json:"run_ns"`
}

// FioJob is one fio reference run of a bench: fio's own figures, and what
// dbiolat measured for fio's process at the same time, so that a reader
// can check the two against each other.
type FioJob struct {
	Type      string  `json:"type"` // "fio"
	Name      string  `json:"name"` // "seqread", "randread", "randwrite", "randread-qd16"
	RW        string  `json:"rw"`   // fio's rw=
	BlockSize int     `json:"block_size"`
	IODepth   int     `json:"iodepth"`
	Engine    string  `json:"ioengine"`
	Seconds   float64 `json:"seconds"`
	Read      FioSide `json:"read"`
	Write     FioSide `json:"write"`
	// What dbiolat saw of fio's process: block I/O latency histograms
	// (fs_read, fs_write, blk_read, blk_write).
	Hists Hists `json:"hists,omitempty"`
	// fio's processes' time waiting for a CPU while the job ran
	// (sched_info.run_delay): inside fio's clat, outside the calls
	// dbiolat times, so the two differ by up to this much.
	RunqNs uint64 `json:"runq_ns"`
	// fio's JSON output for the run, unchanged.
	FioOutput json.RawMessage `json:"fio_output"`
}

// FioSide is one direction of a fio run, as fio reported it.
type FioSide struct {
	Ops        uint64  `json:"ops"`
	Bytes      uint64  `json:"bytes"`
	IOPS       float64 `json:"iops"`
	BWBytes    float64 `json:"bw_bytes"` // per second
	ClatMeanNs float64 `json:"clat_mean_ns"`
	ClatP50Ns  uint64  `json:"clat_p50_ns"`
	ClatP99Ns  uint64  `json:"clat_p99_ns"`
	LatMeanNs  float64 `json:"lat_mean_ns"` // submission + completion
}

// Server is a database server being traced, as dbiolat_server_info
// describes it.
type Server struct {
	Name      string          `json:"name"` // ServerName
	Kind      string          `json:"kind"` // "PostgreSQL", "MariaDB", "MySQL"
	Version   string          `json:"version"`
	PID       int             `json:"pid"`
	DataDir   string          `json:"data_dir"` // as the server sees it (in its container)
	Port      int             `json:"port,omitempty"`
	Container *container.Info `json:"container,omitempty"`
}

// ServerName names a server by what outlives its restarts: its data
// directory as the server sees it, after its pod ("namespace/pod:") or
// else its container ("id:", 12 digits) when it runs in one, since two
// containers may well use the same path.
func ServerName(dataDir string, c *container.Info) string {
	switch {
	case c == nil || !c.InContainer():
		return dataDir
	case c.Pod != "" && c.Namespace != "":
		return c.Namespace + "/" + c.Pod + ":" + dataDir
	}
	return c.ID[:min(12, len(c.ID))] + ":" + dataDir
}

// Role is what a server's process or thread does, in its engine's words
// ("client backend", "checkpointer"; "connection", "page cleaner"), or
// that it is a storage engine serving it. Records and rates carry it as
// a string.
type Role string

// The roles every engine shares.
const (
	RoleUnknown       Role = "unknown"
	RoleStorageEngine Role = "storage engine"
)
