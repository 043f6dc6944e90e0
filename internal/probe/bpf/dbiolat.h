/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by the kernel programs and Go: the one definition of each.
 * bpf2go turns the types named in gen.go into Go structs, so a field added
 * here reaches both sides by `make generate`.
 */
#ifndef DBIOLAT_H
#define DBIOLAT_H

#define QUERY_TEXT_MAX 4096 /* bytes of query text copied per query (power of 2) */
#define HIST_SLOTS 64       /* log2 slots, see bits.bpf.h and internal/hist */
#define USDT_MAX_ARGS 12    /* the most arguments a USDT site may have */
#define TITLE_MAX 64        /* bytes of the process title sent with a query */
#define APPLICATION_MAX 64  /* bytes of the application name sent with a query, its NUL included
			     * (PostgreSQL's NAMEDATALEN: what pg_stat_activity shows) */
#define QUERY_WAITS 8       /* wait events named per query; the last slot takes the rest */
#define WAIT_EVENTS_OTHER 0xffffffff /* the wait events beyond the others' slots */

/*
 * File system operations, as seen at the syscall boundary; then the reads
 * again, split by the page cache: every read is a hit or a miss, so the
 * two always add up to FS_READ (fsio.bpf.c).
 */
enum fs_op {
	FS_READ = 0,  /* read, pread64, readv, preadv, preadv2 */
	FS_WRITE = 1, /* write, pwrite64, writev, pwritev, pwritev2 */
	FS_SYNC = 2,  /* fsync, fdatasync, sync_file_range */
	FS_OPS = 3,
	FS_READ_HIT = 3,  /* reads served by the page cache */
	FS_READ_MISS = 4, /* reads that slept, or started block requests or readahead */
	FS_ACCTS = 5,     /* the accounts of struct io_acct fs[] */
};

/* Block request operations. */
enum blk_op {
	BLK_READ = 0,
	BLK_WRITE = 1,
	BLK_OTHER = 2, /* flush, discard, write zeroes: device time without data */
	BLK_OPS = 3,
};

/* Who submitted a block request. */
enum blk_owner {
	OWNER_TRACED = 0,  /* a process of a traced database instance */
	OWNER_KERNEL = 1,  /* a kernel thread: writeback, kworkers, jbd2 */
	OWNER_OTHER = 2,   /* any other user process (a dd beside the database) */
	OWNER_KINDS = 3,
};

/*
 * The enums below name what Go shows: Go reads their value names from the
 * object's BTF (HIST_FS_READ is the histogram "fs_read", STAT_RINGBUF_FULL
 * the counter "ringbuf_full", BOX_IO_WAIT the box "io_wait_ns"), and
 * internal/model's catalog describes each name once. A test checks the
 * two agree: a new value here needs its catalog entry.
 */

/* In-kernel histograms (log2 of nanoseconds). */
enum hist_id {
	HIST_FS_READ = 0, /* traced processes, from syscall entry to exit */
	HIST_FS_WRITE = 1,
	HIST_FS_SYNC = 2,
	HIST_BLK_READ = 3, /* block requests of traced processes, io_start to io_done */
	HIST_BLK_WRITE = 4,
	HIST_BLK_OTHER = 5,
	HIST_QUERY = 6, /* every finished query, recorded or not */
	HIST_RUNQ = 7,  /* run-queue waits of backends in queries */
	HIST_LOCK = 8,  /* heavyweight and LWLock sleeps of backends in queries */
	HIST_FS_READ_HIT = 9,   /* reads served by the page cache */
	HIST_FS_READ_MISS = 10, /* reads that waited for I/O or started it */
	HIST_BLK_READ_SIZE = 11, /* bytes per block read request of traced processes */
	HIST_BLK_WRITE_SIZE = 12,
	HIST_FUSE = 13, /* requests traced processes sent to a FUSE daemon: send to answer */
	HIST_IDS = 14,
};

/* Counters of things that did not go as planned; every output shows them. */
enum stat_id {
	STAT_RINGBUF_FULL = 0,     /* a query record could not be delivered */
	STAT_THREADS_FULL = 1,     /* the per-thread map was full: that thread is not traced */
	STAT_INFLIGHT_FULL = 2,    /* the in-flight block request map was full */
	STAT_PROC_TOTALS_FULL = 3, /* per-process counters could not be created */
	STAT_BLK_TOTALS_FULL = 4,  /* per-device counters could not be created */
	STAT_QUERY_UNFINISHED = 5, /* query__start again without query__done: the first was dropped */
	STAT_QUERY_TEXT_FAULT = 6, /* the query text could not be read from the process */
	STAT_BLK_LATE = 7,         /* not a drop: a query's block request still in flight when it ended */
	STAT_USDT_ARG_FAULT = 8,   /* a USDT argument could not be decoded */
	STAT_WATERFALL_FULL = 9, /* no task storage for a backend: no waterfall for its query */
	STAT_PROC_RUNS_FULL = 10, /* a process-exit record could not be delivered */
	STAT_BLK_MERGES = 11,     /* not a drop: bios of traced processes merged into a request */
	STAT_WIRE_ENCRYPTED = 12, /* client connections encrypted (TLS unprobed, GSS): their queries are not seen */
	STAT_WIRE_UNREADABLE = 13, /* client bytes that could not be read: no query started */
	STAT_WIRE_UNSEEN = 14,    /* round trips whose first message we did not see (pipelined) */
	STAT_WATERFALL_MISSED = 15, /* not a drop: a context switch of a thread in a query not seen; the time since is unaccounted */
	STAT_WATERFALL_RECOVERED = 16, /* not a loss: a switch-in not seen, its interval split by the kernel's stamp */
	STAT_WAIT_HISTS_FULL = 17, /* a wait event's histogram could not be created */
	STAT_AIO_UNSEEN = 18,      /* an I/O worker performed a read whose staging was not seen */
	STAT_WIRE_TLS = 19,        /* not a loss: TLS connections read through their TLS library */
	STAT_FUSE_FULL = 20,       /* a FUSE request could not be followed (map full) */
	STAT_FUSE_UNSEEN = 21,     /* not a loss: a FUSE daemon took a request not sent by a traced process */
	STAT_MYSQL_CONN_FULL = 22, /* a MySQL connection's state could not be created: its queries are not seen */
	STAT_MYSQL_REPLY_UNSEEN = 23, /* the end of a MySQL reply was not recognized: its query ended at the next command */
	STAT_BLK_UNSEEN = 24,      /* not a loss: a block request not seen whole (in flight at attach, done after a pause) */
	STAT_QUERY_CUT = 25,       /* not a loss: a query begun before tracing paused, left out (duty cycles) */
	STAT_UNIT_HISTS_FULL = 26, /* a unit's histogram could not be created: its I/O is in the host's only */
	STAT_WIRE_GROUPED = 27,    /* not a loss: statements timed together with others in one record (a pipeline's
				    * whose replies were sent together, a multi-statement command's) */
	STAT_WIRE_UNWALKED = 28,   /* a reply whose messages could not be walked: its statements counted as one */
	STAT_RUNQ_UNKNOWN = 29,    /* not a loss: a query's wake whose run-queue wait the kernel's clock did not measure */
	STAT_WIRE_UNCAPTURED = 30, /* a read of a pipeline's request not captured whole: statements in it may go unnamed */
	STAT_STMTS_FULL = 31,      /* a statement identity found the kernel's table full: its queries count in "other" */
	STAT_IDS = 32,
};

/*
 * The waterfall's boxes: with the unaccounted rest they partition a
 * query's time. A sleep is charged to the box of what the thread waited
 * for: the class of the wait event the database published (sched.bpf.c),
 * else what the thread was doing. BOX_CPU never is one, so 0 also means
 * "no wait named".
 */
enum box {
	BOX_CPU = 0,        /* on CPU */
	BOX_RUNQ = 1,       /* runnable, waiting for a CPU */
	BOX_IO_WAIT = 2,    /* asleep waiting for I/O */
	BOX_LOCK = 3,       /* asleep waiting for a heavyweight lock */
	BOX_LWLOCK = 4,     /* asleep waiting for an LWLock */
	BOX_OTHER_WAIT = 5, /* asleep for anything else (latch, pg_sleep, client) */
	BOX_AIO_WAIT = 6,   /* asleep until I/O another process or thread does for it completes (PostgreSQL 18, InnoDB) */
	BOXES = 7,
};

/*
 * Wait events the database does not publish but a probe brackets:
 * MySQL's and MariaDB's thd_wait_begin(thd, type) types, as events of
 * this class (top byte), apart from PostgreSQL's classes.
 */
enum wait_class {
	WAIT_CLASS_MYSQL = 0x4d000000, /* | the thd_wait_type: 3 a row lock, 5 a metadata lock... */
};

/* What the text of a query record is. */
enum text_kind {
	TEXT_SQL = 0,     /* the statement (USDT query__start's argument) */
	TEXT_PG_WIRE = 1, /* the frontend protocol messages of the round trip, as received */
	TEXT_MYSQL = 2,   /* a MySQL command packet's payload; a connection's first: its handshake response */
	TEXT_PG_WIRE_PART = 3, /* a later part of a round trip's messages: its first text_skip bytes end the
				* message the part before ended inside (text_at says where each lies) */
};

/* Why a query record was sent (bits). */
enum emit_flag {
	EMIT_WANTED = 1,    /* it met the command's thresholds: show it */
	EMIT_STATEMENT = 2, /* it prepared a named statement: Go learns the statement's text */
	EMIT_FIRST = 4,     /* the first of its statement identity on this CPU, or one Go asked for: it names it */
	EMIT_COUNTED = 8,   /* its statement is counted in the kernel's statement totals: not to count again */
	EMIT_SAMPLED = 16,  /* drawn at random (the OpenTelemetry export's sample) */
};


struct io_acct {
	__u64 count;
	__u64 bytes;
	__u64 ns;
};

/*
 * Every query counted in the kernel by its statement's identity (serve,
 * top: statements.bpf.h). The identity is what the server itself names
 * the statement by: PostgreSQL's query id (st_query_id, what
 * pg_stat_statements keys by) in its database, from an application.
 * Each CPU keeps its own entry of an identity, so no two CPUs write one
 * and no lock is taken; Go adds them up.
 */
enum stmt_size {
	STMT_SLOTS = 32,   /* the query-latency log2 slots kept per identity... */
	STMT_SLOT_MIN = 8, /* ...from slot 8 ([256 ns, 512 ns), and all below) to 39 (2^39 ns, 9 min, and above) */
	STMT_ASK = 1024,   /* identities Go may ask a record of, by their query id's low bits */
	STMT_TEXT_HASHED = 512, /* bytes of a statement's text its identity hashes (and its length) */
};

/* What a statement identity is (struct stmt_key.kind). */
enum stmt_kind {
	STMT_QUERY_ID = 1, /* PostgreSQL's query id */
	STMT_TEXT = 2,     /* a hash of the statement's text without its literals (no query id) */
	STMT_PREPARED = 3, /* a hash of a prepared statement's name or id within its connection */
	STMT_ROUND_TRIP = 4, /* a hash of a pipeline's statements of several texts, in order */
};

struct stmt_key {
	__u64 queryid;     /* the server's query id, or a hash (kind) */
	__u32 instance;    /* the server (its postmaster; MySQL's server process) */
	__u32 database;    /* PostgreSQL: the backend's database (PgBackendStatus.st_databaseid) */
	__u32 application; /* PostgreSQL: a hash of the application's name (0: none) */
	__u16 cpu;
	__u16 kind;        /* enum stmt_kind */
};

struct stmt_totals {
	__u64 calls; /* statements ended */
	__u64 ns;    /* their time, earlier parts of suspended portals included */
	__u64 box_ns[BOXES];
	struct io_acct fs[FS_ACCTS];
	struct io_acct blk[BLK_OPS];
	__u64 blk_busy_ns;   /* as struct query_acct's */
	__u64 blk_queue_ns;
	__u64 blk_device_ns;
	__u64 slots[STMT_SLOTS]; /* their latencies, log2 (bits.bpf.h), from STMT_SLOT_MIN */
};

/* The time asleep under one wait event (a database's code for it). */
struct wait_time {
	__u32 event; /* 0: an empty slot; WAIT_EVENTS_OTHER: the events with no slot */
	__u32 pad;
	__u64 ns;
};

/* Everything one query accumulates while it runs. */
struct query_acct {
	struct io_acct fs[FS_ACCTS]; /* by enum fs_op */
	/* Block requests the query started (count, bytes: at their start;
	 * ns: of those that completed before it ended). */
	struct io_acct blk[BLK_OPS];
	__u64 blk_busy_ns;   /* wall time with at least one of the query's requests in flight */
	__u64 blk_queue_ns;  /* inserted -> issued, summed over the query's completed requests */
	__u64 blk_device_ns; /* issued -> completed, summed */
	__u64 box_ns[BOXES]; /* the waterfall, by enum box */
	__u64 readahead_pages; /* pages the kernel decided to read ahead */
	struct io_acct prefetch; /* read-ahead advice (posix_fadvise WILLNEED): calls, bytes advised */
	struct io_acct aio_read; /* reads an I/O worker performed for it: I/Os, bytes, their time */
	/* A userspace storage engine (a FUSE daemon) serving it (fuse.bpf.c). */
	struct io_acct fuse;          /* requests it sent: count, bytes answered, send -> answer */
	__u64 engine_ns;              /* the daemon's time on them: taking the request -> answering */
	__u64 engine_cpu_ns;          /* of engine_ns, the daemon's time on CPU */
	struct io_acct engine_fs[FS_ACCTS]; /* the daemon's file system calls for it, by enum fs_op */
	struct io_acct engine_blk;    /* block requests the daemon started for it (also in blk[]) */
	__u32 engine_tgid;            /* the daemon (the last one, if several served it) */
	__u32 pad_engine;
	/* Of box_ns[BOX_RUNQ], the waits that ended when a storage engine's
	 * thread (PROC_STORAGE) left the CPU to the query's thread: each wait
	 * charged whole to the task that ran last before it (sched.bpf.c). */
	__u64 runq_engine_ns;
	__u64 runq_waits; /* the run-queue waits in box_ns[BOX_RUNQ]: how often it waited */
	/* Shared buffers (opt-in: a probe on every buffer access). */
	__u64 shared_hit;
	__u64 shared_read;
};

/*
 * The client connection a pooler (pgbouncer) forwarded a request for, as
 * the pooler's socket to that client shows it.
 */
struct client_end {
	__u8 addr[16];  /* TCP: the client's address (IPv4: its first 4 bytes) */
	__u16 port;     /* TCP: its port */
	__u16 family;   /* AF_INET, AF_INET6, AF_UNIX; 0: not known */
	__u32 pid;      /* a unix socket's: the client's process (its peer credentials) */
};

/* A server connection's current client behind a pooler (pooler.bpf.h). */
struct pooled_for {
	struct client_end client;
	__u32 pooler; /* the pooler's process; 0: the connection is not a pooler's */
	__u32 pad;
};

/*
 * A server's client connection, named so that both of its ends compute
 * the same key: a unix socket by the server end's struct sock * (the
 * pooler's socket's peer), TCP by its two addresses and ports.
 */
struct conn_key {
	__u64 server_sk;       /* unix: the server's end; TCP: 0 */
	__u8 server_addr[16];  /* TCP: the server's address and port... */
	__u8 client_addr[16];  /* ...and the client's (the pooler's) */
	__u16 server_port;
	__u16 client_port;
	__u32 pad;
};

/* One finished query, sent through the ring buffer at query__done. */
struct query_event {
	__u64 start_ns; /* CLOCK_MONOTONIC */
	__u64 end_ns;
	__u32 pid; /* thread id (a PostgreSQL backend is single-threaded) */
	__u32 tgid;
	__u32 instance; /* postmaster pid */
	__u8 text_kind;  /* enum text_kind */
	__u8 emit_flags; /* enum emit_flag */
	__u16 text_skip; /* TEXT_PG_WIRE_PART: where the first message starting in the text starts */
	/* A MySQL connection: the server's id for it (its greeting's), or, for
	 * one older than the trace, its socket's address (above 2^32). */
	__u64 conn;
	__u32 reply_id; /* what the server's reply named: the id of the statement a COM_STMT_PREPARE prepared */
	/* The statements the record holds: one, but for a PostgreSQL pipeline
	 * whose statements' replies went out together (their time is shared),
	 * and none for a portal suspended at its row limit (the statement goes
	 * on in a later round trip) or a round trip that only prepares. */
	__u32 statements;
	__u32 first_statement; /* the place of its first among its round trip's statements (0: the first) */
	__u32 failed;          /* of its statements, those the server answered with an error */
	__u32 text_first;      /* the place among them of the first statement in its text */
	__u32 text_at;         /* PostgreSQL: where the text starts in the bytes its backend read since
				* the round trip (or the one it was sent with) began */
	/* The statement's query id as the server computed it (PostgreSQL's
	 * st_query_id, what pg_stat_statements keys by), read from the
	 * backend's memory when the record ends (proc_info.status_off); 0 when
	 * unknown: compute_query_id off, MySQL, an unknown layout. */
	__u64 queryid;
	/* The statement identity it is counted under (EMIT_COUNTED): a record
	 * EMIT_FIRST names it for Go. */
	struct stmt_key stmt;
	/* PostgreSQL's portals suspended at their row limit, whose statements
	 * count when the portal ends (struct wire's open): a record whose round
	 * trip left a fresh one suspended says how many are open after it; a
	 * record of those that ended in a later round trip (a Close, a new
	 * unnamed portal, the transaction's commit) says how many it holds,
	 * which are all its statements (Go names them from the records that
	 * suspended them). */
	__u16 portals_open;
	__u16 portals_ended;
	/* The time of its statements' earlier parts, in earlier records (their
	 * portals were suspended): not within start..end. */
	__u64 earlier_ns;
	/* The start of the process title ("postgres: user db host …"): a
	 * short session may be gone before Go can read /proc. */
	char title[TITLE_MAX];
	/* The application that sent it, as the server knows it when the query
	 * ends (PostgreSQL's application_name, read from the backend's memory:
	 * proc_info.application_off); empty when unknown or for MySQL, whose
	 * connection attributes Go reads from the handshake record. */
	char application[APPLICATION_MAX];
	/* Behind a pooler or MySQL Router: the client connection it forwarded
	 * the round trip for (zero elsewhere). */
	struct pooled_for pooled;
	struct query_acct acct;
	/* Its sleeps by the wait event the database named (kept in the
	 * waterfall, not in every thread's state: they are only sent). */
	struct wait_time waits[QUERY_WAITS];
	__u32 text_len; /* bytes of text that follow, without the NUL */
	__u32 text_truncated;
	char text[QUERY_TEXT_MAX];
};

/*
 * One traced process that exited, or a MySQL server's thread (a unit,
 * thread_state.unit): its whole run (an autovacuum worker's,
 * a parallel worker's, a connection's), sent at sched_process_exit.
 */
struct proc_run {
	__u64 start_ns; /* CLOCK_MONOTONIC, fork */
	__u64 end_ns;
	__u64 cpu_ns;   /* sum_exec_runtime of the task that ended (a process: its main thread) */
	__u64 utime_ns; /* the kernel's user/system split of it */
	__u64 stime_ns;
	__u64 runq_ns;  /* sched_info.run_delay: runnable, waiting for a CPU */
	__u32 pid; /* the unit: a process, or a MySQL server's thread */
	__u32 instance;
	struct io_acct fs[FS_ACCTS];
};

/* Per process I/O counters, read by Go for rates by role. */
struct proc_io {
	struct io_acct fs[FS_ACCTS];
};

struct blk_key {
	__u32 dev; /* kernel dev_t of the whole disk: major << 20 | minor */
	__u32 unit; /* the submitter's unit (thread_state.unit) when traced, else 0 */
	enum blk_op op;
	enum blk_owner owner;
};

struct blk_io {
	struct io_acct io;
	__u64 queue_ns;
	__u64 device_ns;
};

struct hist {
	__u64 slots[HIST_SLOTS];
	__u64 sum; /* of the values: nanoseconds, or bytes for the size histograms */
};

/*
 * Where a thread in a query spends its time, in task-local storage: the
 * scheduler hook runs on every context switch of the machine,
 * and for a task without storage the lookup is a pointer test, not a hash
 * lookup.
 */
struct waterfall {
	__u64 oncpu_since;    /* on CPU since (0: off) */
	__u64 offcpu_since;   /* off CPU since (0: on) */
	__u64 box_ns[BOXES];  /* by enum box */
	struct wait_time waits[QUERY_WAITS];
	__u32 wait_event;     /* the wait event published when the thread went to sleep */
	__u32 wait_version;   /* the version of the database that named it */
	__u32 in_query;       /* in a query: nonzero, the low bits of its start, so that another thread
			       * closing it (mysql_take) cannot close the next one by mistake */
	__u32 bracket_event;  /* the wait a probe brackets now, named as a wait event (MySQL's thd_wait_begin) */
	__u8 in_fs;           /* inside a file system syscall */
	__u8 waiting_for;     /* enum box of the wait lock probes bracket, else 0 */
	__u8 asleep;          /* off CPU asleep, not preempted */
	__u8 asleep_box;      /* enum box of that sleep */
	__u8 serving;         /* a storage engine's thread serving a query's request: its CPU is counted */
	__u8 pad[3];
	__u64 serve_cpu_ns;   /* its CPU on that request until it last went off CPU */
	__u64 runq_engine_ns; /* in a query: of box_ns[BOX_RUNQ], the waits behind a storage engine's thread */
	__u64 runq_waits;     /* in a query: how many waits box_ns[BOX_RUNQ] holds */
};

/*
 * Where a backend's conversation with its client is (pgwire.bpf.c). Go sets
 * the state of processes running when it attaches; the kernel sets it for
 * processes forked later.
 */
enum wire_state {
	WIRE_OFF = 0,       /* not serving a client: ignored */
	WIRE_NEW = 1,       /* forked since we attached: its first message tells */
	WIRE_ATTACHED = 2,  /* a client backend that was running when we attached */
	WIRE_SSL_ASKED = 3, /* the client asked for encryption: the answer tells */
	WIRE_STARTUP = 4,   /* authenticating, until the first ReadyForQuery */
	WIRE_IDLE = 5,      /* between round trips */
	WIRE_BUSY = 6,      /* from a round trip's first message to its ReadyForQuery */
	WIRE_ENCRYPTED = 7, /* TLS or GSS: the messages cannot be read */
};

/* What the messages of the current round trip showed (bits). */
enum wire_flag {
	WIRE_EXEC = 1,        /* it runs a query: Query, Execute or FunctionCall */
	WIRE_NAMED_PARSE = 2, /* it prepares a named statement */
	WIRE_OPEN = 4,        /* its captured messages ended before its Sync */
	WIRE_TRUNCATED = 8,   /* the first read held more than was captured */
	WIRE_WALK = 16,       /* it may run several statements: its replies are walked for their ends */
	WIRE_SUSPENDED = 32,  /* its reply ended with a portal suspended at its row limit */
	WIRE_NAMED_PORTAL = 64, /* it binds a named portal, which a later round trip may resume */
	WIRE_IN_LOST = 128,   /* its request could not be walked: a later read's statements are not captured */
	WIRE_RESUME = 256,    /* an Execute with no Bind before it in the round trip: it resumes a suspended portal */
	WIRE_CLOSE_PORTAL = 512, /* it closes a portal (Close 'P'), which drops it if suspended */
	WIRE_UNNAMED = 1024,  /* it makes a new unnamed portal (a Bind of "", a simple Query), which drops the old one */
};

/* Where a walk of a message stream stands between two socket calls (pgwire.bpf.c). */
struct msg_carry {
	__u32 skip;   /* bytes of the message in progress still to come */
	__u8 hdr_len; /* bytes of a header the last call ended in... */
	__u8 bound;   /* a reply's: a BindComplete since the last statement's end (a fresh portal runs) */
	__u8 pad[2];
	__u8 hdr[8];  /* ...and those bytes */
};

struct wire {
	__u64 sk;       /* the client's socket (struct sock *), once seen */
	__u64 tls_buf;  /* the plaintext buffer of the TLS library call in progress */
	/* MySQL (mysql.bpf.c): the TLS library call in progress, its plaintext at tls_buf */
	__u64 tls_ssl;  /* its connection (SSL *); 0: none */
	__u32 tls_len;  /* SSL_write's plaintext bytes, read at its first send; 0: an SSL_read */
	__u32 text_off; /* where the round trip's messages start in the captured bytes */
	__u32 next_off; /* where the next, pipelined, round trip starts in them (0: none) */
	__u8 state;     /* enum wire_state */
	__u8 tls;       /* the socket carries TLS: its messages come from the TLS library */
	__u16 flags;    /* enum wire_flag */
	__u64 synced_ns; /* the resync_ns its state follows: another, and it resyncs */
	/* A round trip that may run several statements (WIRE_WALK): its reply
	 * and its request are walked message by message across calls. */
	struct msg_carry out, in;
	__u32 done;       /* statements its reply has ended (CommandComplete, ErrorResponse...) */
	__u32 recorded;   /* of them, those already in a record */
	__u32 failed;     /* of the unrecorded, those ended by an ErrorResponse */
	__u32 execs;      /* Executes its request held so far */
	__u32 text_first; /* the statements before the first one in the captured bytes (a later read's) */
	__u8 text_sent;   /* a record carried the captured bytes to Go */
	/*
	 * Portals suspended at their row limit (PortalSuspended) whose statement
	 * is not counted yet: PostgreSQL ends it (ExecutorEnd, where
	 * pg_stat_statements counts it) when the portal completes, is closed, is
	 * replaced (the unnamed one) or its transaction commits; an aborted
	 * transaction drops it uncounted.
	 */
	__u8 open_unnamed; /* of them, the unnamed portal's */
	__u16 opened;      /* this round trip's fresh executions that suspended (not in open yet) */
	__u16 resumed;     /* this round trip's resumed portals that completed, not yet in a record */
	__u32 open;        /* earlier round trips' suspended portals, not yet counted */
	__u8 bind_pending; /* the last round trip bound a portal and ran none: its first Execute is a fresh one's */
	/* Its reply reported no parameter change (reply_quiet): the
	 * application's name is the one read last. */
	__u8 reply_quiet;
	__u8 pad2[2];
	__u64 portal_ns;   /* the time of their parts so far (the round trips that suspended or resumed them) */
	/* count_statements: the backend's status entry (MyBEEntry) and its
	 * database, read once, with its server, where its query id is in
	 * the entry and where its application_name variable is: none of them
	 * changes in a backend's life (stmt_labels). */
	__u64 status_entry;
	__u64 application_at;
	__u32 instance;
	__u32 query_id_off;
	__u32 database;
	/* ...and its application_name's hash, kept with the address of the
	 * string it was read from (stmt_application). */
	__u32 application;
	__u64 application_ptr;
};

/* The task-local state of a traced thread. */
struct task_local {
	struct waterfall wf;
	struct wire wire;
	/* Its process's proc_info.kind, kept with the thread: the socket hooks
	 * tell a MySQL server's threads from a PostgreSQL server's without a
	 * lookup. */
	__u32 kind;
	__u32 instance; /* and its proc_info.instance: a MySQL statement counted without a lookup */
	__u32 slot;     /* its thread_state's slot + 1 (state.bpf.h); 0: not a traced thread */
	__u32 pad;
};

/* Which process belongs to which traced instance (keyed by tgid). */
struct proc_info {
	__u32 instance;       /* postmaster pid */
	__u32 aio_wait_event; /* the wait event of waiting for others' asynchronous I/O, 0: none */
	__u64 wait_event_ptr; /* where the process keeps the pointer to its wait event (PostgreSQL:
			       * my_wait_event_info), 0: unknown */
	__u32 version;        /* the database's major version: wait events are numbered per version */
	__u32 flags;          /* enum proc_flag */
	__u32 kind;           /* enum proc_kind */
	/* Where the process keeps the pointer to its application name
	 * (PostgreSQL: the GUC variable application_name), from
	 * wait_event_ptr: both are variables of its executable, so a 32-bit
	 * offset holds it, and the map (an entry per traced process) does not
	 * grow; 0: unknown. */
	__s32 application_off;
	/* Where the process keeps the pointer to its status entry (PostgreSQL:
	 * MyBEEntry, its PgBackendStatus), from wait_event_ptr as
	 * application_off; 0: unknown. */
	__s32 status_off;
	/* Where the current statement's query id lies in that entry
	 * (PgBackendStatus.st_query_id, by major version); 0: unknown. */
	__u32 query_id_off;
	__u32 database_off; /* and the backend's database (st_databaseid); 0: unknown */
};

/* What a traced process is. */
enum proc_kind {
	PROC_POSTGRES = 0, /* a PostgreSQL server's: its clients speak PostgreSQL's protocol, one per backend */
	PROC_MYSQL = 1,    /* a MySQL or MariaDB server: its clients speak MySQL's protocol, on any thread */
	PROC_STORAGE = 2,  /* a storage engine serving an instance from user space (a FUSE daemon) */
	PROC_POOLER = 3,   /* a connection pooler in front of PostgreSQL (pgbouncer): whom it forwards requests for */
	PROC_ROUTER = 4,   /* a proxy in front of MySQL (MySQL Router): the same, its reads seen by mysql.bpf.c */
};

enum proc_flag {
	PROC_TLS_PROBED = 1, /* its TLS library's reads and writes are probed: TLS is read in plaintext */
};

/*
 * A unit's histogram (thread_state.unit): the file system and block ones
 * again, per unit, so that Go can split them by server, database and role.
 */
struct unit_hist_key {
	__u32 unit;
	__u32 id; /* enum hist_id */
};

/* A wait event's histogram: events are numbered per database version. */
struct wait_key {
	__u32 version;
	__u32 event;
};

/* Where one USDT argument lives; filled by Go from the note's spec. */
enum usdt_arg_kind {
	USDT_ARG_CONST = 0,
	USDT_ARG_REG = 1,
	USDT_ARG_REG_DEREF = 2,
};

struct usdt_arg {
	__s64 val_off;  /* constant, or offset added to the register for deref */
	__u16 reg_off;  /* offset of the register in struct pt_regs */
	__u8 kind;      /* enum usdt_arg_kind */
	__u8 bitshift;  /* 64 - 8*size: to cut a sub-register or narrow load */
	__u8 is_signed;
	__u8 pad[3];
};

/* Argument locations of one USDT site, indexed by the uprobe's cookie. */
struct usdt_spec {
	struct usdt_arg args[USDT_MAX_ARGS];
	__u32 nargs;
	__u32 pad;
};

#endif /* DBIOLAT_H */
