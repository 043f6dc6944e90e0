/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which query is a MySQL or MariaDB thread running? Read from the bytes on
 * its clients' sockets, as wire.bpf.c reads PostgreSQL's: a query begins
 * when the server reads a command packet (COM_QUERY, COM_STMT_EXECUTE...)
 * and ends when it sends the last packet of its reply: an OK, an ERR, or
 * the EOF after the last row, without "more results exist".
 *
 * The state is per connection (socket-local storage), not per thread: in
 * MariaDB's thread pool a connection's commands run on any worker thread.
 * A command runs on one thread from its read to its reply, so the query's
 * accounting stays the thread's, as for PostgreSQL.
 *
 * A reply is a stream of packets (3-byte length, sequence number) that the
 * server sends in buffer-sized pieces: each send is walked packet by packet
 * to know where the next packet starts, and the first bytes of each are
 * read to follow the reply: column count, column definitions, an EOF
 * (unless the client asked for none: CLIENT_DEPRECATE_EOF); a result's
 * rows are not walked, their end is the EOF or OK at a send's tail
 * (my_rows_end). A reply whose end is missed ends at the connection's
 * next command, and is counted.
 *
 * The client's command packet (up to QUERY_TEXT_MAX - 1 bytes) goes with
 * the record; Go reads the statement out of it (internal/mysql), the text
 * of a prepared statement from the COM_STMT_PREPARE that the record of its
 * reply's statement id taught it, and user and database from the
 * connection's handshake response, sent as its first record.
 *
 * TLS connections are read in plaintext at the TLS library the server
 * maps (OpenSSL's SSL_read, its return, and SSL_write), as wire.bpf.c
 * reads PostgreSQL's. A uprobe has no socket storage, so their state is a
 * second struct my_conn per library connection (SSL *), in my_tls_conns;
 * the socket only says it carries TLS (MY_TLS), and a socket call inside
 * SSL_read tells the library connection its socket.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "sock.bpf.h"

#define MY_HEAD 32       /* a packet's header and the first payload bytes its kind needs (a power of 2) */
#define MY_MAX_HOPS 1024 /* packets walked per send, before a result's rows */
#define MY_MAX_PACKET 0xffffff

/* Commands (the first payload byte of a client's packet with sequence 0). */
#define COM_QUIT 0x01
#define COM_INIT_DB 0x02
#define COM_QUERY 0x03
#define COM_FIELD_LIST 0x04
#define COM_STATISTICS 0x09
#define COM_CHANGE_USER 0x11
#define COM_BINLOG_DUMP 0x12
#define COM_REGISTER_SLAVE 0x15
#define COM_STMT_PREPARE 0x16
#define COM_STMT_EXECUTE 0x17
#define COM_STMT_SEND_LONG_DATA 0x18
#define COM_STMT_CLOSE 0x19
#define COM_STMT_FETCH 0x1c
#define COM_BINLOG_DUMP_GTID 0x1e
#define COM_STMT_BULK_EXECUTE 0xfa /* MariaDB */

#define CLIENT_SSL (1U << 11)
#define CLIENT_DEPRECATE_EOF (1U << 24)
#define SERVER_MORE_RESULTS_EXIST 0x0008
#define SERVER_STATUS_CURSOR_EXISTS 0x0040

/* Where a connection is. */
enum my_state {
	MY_UNSEEN = 0,    /* its first packet not seen yet: older than the trace, or new */
	MY_GREETED = 1,   /* the server sent its greeting: the handshake response comes next */
	MY_IDLE = 2,      /* between commands */
	MY_BUSY = 3,      /* from a command to the end of its reply (the handshake too) */
	MY_OFF = 4,       /* encrypted, a replication stream, or gone: not followed */
	MY_TLS = 5,       /* a socket carrying TLS: followed in plaintext at the library (my_tls_conns) */
};

/* Where in its reply the server is. */
enum my_part {
	PART_FIRST = 0,       /* the first packet of a reply, or of its next result set */
	PART_AUTH = 1,        /* the authentication exchange: it ends with an OK or an ERR */
	PART_DEFS = 2,        /* a COM_STMT_PREPARE's parameter and column definitions */
	PART_COLUMNS = 3,     /* a result set's column definitions */
	PART_COLUMNS_EOF = 4, /* the EOF after them */
	PART_ROWS = 5,        /* rows, until an EOF, OK or ERR */
};

/* What a connection's client is known to do (bits). */
enum my_flag {
	MY_NO_EOF = 1,  /* CLIENT_DEPRECATE_EOF: no EOF after column definitions */
	MY_TLS_NEW = 2, /* a socket whose SSLRequest was seen: its handshake response comes through SSL_read */
};

struct my_conn {
	__u64 conn;      /* the connection id of the server's greeting; 0: not seen */
	__u32 carry;     /* bytes of the packet in progress still to be sent */
	__u32 left;      /* definitions left in this part of the reply */
	__u32 reply_id;  /* the statement id a COM_STMT_PREPARE's reply gave */
	__u32 owner;     /* the thread whose query the command is */
	__u32 in_len;    /* the client packet whose header was read alone: its length... */
	__u32 cmd_left;  /* bytes of the client's packet still to be read, past what was captured */
	__u32 results;   /* results the reply ended so far with "more results exist": a multi-statement command's */
	__u8 state;      /* enum my_state */
	__u8 cmd;        /* the command running; 0 for the handshake */
	__u8 part;       /* enum my_part */
	__u8 flags;      /* enum my_flag */
	__u8 have;       /* bytes of head kept from the last send: a packet split across sends */
	__u8 in_seq;     /* ...its sequence number... */
	__u8 in_header;  /* ...when its payload comes next (servers read the header first) */
	__u8 pad;
	__u64 synced_ns; /* the resync_ns its state follows: another, and it resyncs */
	__u8 head[MY_HEAD];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct my_conn);
} my_conns SEC(".maps");

/*
 * Queries whose thread left them before their reply: in MariaDB's thread
 * pool a COMMIT's OK is sent once the redo log is written, by whichever
 * worker resumes the connection, while the one that ran it takes other
 * connections' commands. The record waits here, by connection, for the
 * reply; the time in between is waiting for others' work (BOX_AIO_WAIT).
 */
#define MY_PARKED_TEXT 512 /* the command's first bytes: a COM_STMT_EXECUTE's are few */
struct my_parked {
	__u8 head[__builtin_offsetof(struct query_event, text)]; /* the record but its text */
	__u64 parked_ns;
	__u32 text_len;
	__u32 truncated;
	char text[MY_PARKED_TEXT];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64); /* the connection's socket */
	__type(value, struct my_parked);
} my_parked SEC(".maps");

/* Where a record is made whole before it goes into my_parked in one update:
 * the thread sending its reply may look it up at any moment. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct my_parked);
} my_parking SEC(".maps");

/*
 * What ends a parked record, taken from the connection when its reply
 * ended. The owner parks between taking the query's start and the record
 * landing in my_parked; a reply ending in that window leaves this here for
 * the owner to find once it has parked (my_handoff).
 */
struct my_reply {
	__u64 end_ns;
	__u64 conn;
	__u32 reply_id;
	__u32 statements; /* the command's, if it ran any: one a result */
	__u8 cmd;
	__u8 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64); /* the connection's socket */
	__type(value, struct my_reply);
} my_replies SEC(".maps");

/* Written by a locked instruction, a full barrier (my_handoff). */
volatile __u64 my_fence;

/*
 * TLS connections, by the TLS library's connection (SSL *) in the server
 * process: their protocol state, read in plaintext at the library, and
 * the socket they were last read from (the connection's key elsewhere).
 * LRU: a connection that ends without COM_QUIT is not seen to end.
 */
struct my_tls_key {
	__u32 tgid;
	__u32 pad;
	__u64 ssl;
};

struct my_tls_conn {
	struct my_conn c;
	__u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct my_tls_key);
	__type(value, struct my_tls_conn);
} my_tls_conns SEC(".maps");

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

static __always_inline __u32 le16(const __u8 *p) { return p[0] | (__u32)p[1] << 8; }
static __always_inline __u32 le24(const __u8 *p) { return p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16; }
static __always_inline __u32 le32(const __u8 *p) { return le24(p) | (__u32)p[3] << 24; }

/* The size of a length-encoded integer starting with byte b. */
static __always_inline __u32 lenenc_size(__u8 b)
{
	switch (b) {
	case 0xfc:
		return 3;
	case 0xfd:
		return 4;
	case 0xfe:
		return 9;
	}
	return 1;
}

/* The value of a length-encoded integer that fits 32 bits (a count). */
static __always_inline __u32 lenenc32(const __u8 *p)
{
	switch (p[0]) {
	case 0xfc:
		return le16(p + 1);
	case 0xfd:
		return le24(p + 1);
	}
	return p[0];
}

/*
 * The status flags of an OK or EOF packet (p: its payload's head, plen its
 * length): an EOF is 5 bytes (0xfe, warnings, status); an OK is its header,
 * affected rows, last insert id, then the status.
 */
static __always_inline __u32 status_of(const __u8 *p, __u32 plen)
{
	__u32 off;

	if (p[0] == 0xfe && plen == 5)
		return le16(p + 3);
	off = 1 + lenenc_size(p[1]);
	off += lenenc_size(p[off & 15]);
	return le16(p + (off & 31)); /* p has MY_HEAD bytes of slack behind it */
}

/* The walk through one send, in the loop's context. */
struct my_walk {
	void *buf;        /* the send's user buffer */
	__u32 n;          /* its length */
	__u32 off;        /* where the next packet starts */
	struct my_conn c; /* the connection's reply state, copied in and out */
	__u8 ended;       /* the reply's last packet was in this send */
};

/* Follows the reply by one packet; 1 when it was the reply's last. */
static __always_inline int my_packet(struct my_conn *c, const __u8 *p, __u32 plen)
{
	__u32 status, size;

	switch (c->part) {
	case PART_AUTH: /* an auth switch (0xfe) or more data (0x01) goes on */
		return p[0] == 0x00 || p[0] == 0xff;
	case PART_DEFS:
		return --c->left == 0;
	case PART_COLUMNS:
		if (--c->left == 0)
			c->part = (c->flags & MY_NO_EOF) ? PART_ROWS : PART_COLUMNS_EOF;
		return 0;
	case PART_COLUMNS_EOF:
		if (p[0] == 0xfe && plen == 5) {
			c->part = PART_ROWS;
			/* A cursor was opened: its rows come with COM_STMT_FETCH. */
			return (le16(p + 3) & SERVER_STATUS_CURSOR_EXISTS) != 0;
		}
		c->flags |= MY_NO_EOF; /* a row: the client asked for no EOF after all */
		c->part = PART_ROWS;
		/* fallthrough */
	case PART_ROWS:
		if (p[0] == 0xff)
			return 1;
		if (p[0] != 0xfe || plen >= MY_MAX_PACKET) /* a row (0xfe starts only a huge one) */
			return 0;
		if (plen >= 7) /* an OK in place of the EOF */
			c->flags |= MY_NO_EOF;
		break;
	default: /* PART_FIRST */
		if (p[0] == 0xff)
			return 1;
		if (p[0] == 0xfb) /* LOCAL INFILE: the client sends a file, then the server answers */
			return 0;
		if (p[0] == 0x00 && c->cmd == COM_STMT_PREPARE && plen >= 9) {
			/* statement id, columns, parameters; each list of definitions
			 * is followed by an EOF unless the client asked for none */
			__u32 cols = le16(p + 5), params = le16(p + 7);

			c->reply_id = le32(p + 1);
			c->left = cols + params;
			if (!(c->flags & MY_NO_EOF))
				c->left += (cols != 0) + (params != 0);
			c->part = PART_DEFS;
			return c->left == 0;
		}
		if (p[0] != 0x00 && p[0] != 0xfe) {
			if (c->cmd == COM_STATISTICS) /* a string */
				return 1;
			/* A result set: its column count, and with MariaDB's cached
			 * metadata a byte saying whether the definitions follow. */
			c->left = lenenc32(p);
			size = lenenc_size(p[0]);
			if (plen == size + 1 && !p[size & 15])
				c->left = 0;
			c->part = PART_COLUMNS;
			if (!c->left)
				c->part = (c->flags & MY_NO_EOF) ? PART_ROWS : PART_COLUMNS_EOF;
			return 0;
		}
	}
	/* an OK or EOF: the reply goes on if more results follow */
	status = status_of(p, plen);
	c->part = PART_FIRST;
	if (status & SERVER_MORE_RESULTS_EXIST) {
		c->results++;
		return 0;
	}
	return 1;
}

/*
 * One packet of the send: its head is read (completed from the head the
 * last send left, for a packet split across sends) and followed.
 */
static long my_hop(__u64 i, void *ctx)
{
	/* head: the packet's first MY_HEAD bytes, with room for the masked
	 * offsets and sizes the verifier can check */
	__u8 head[3 * MY_HEAD] = {};
	struct my_walk *w = ctx;
	struct my_conn *c = &w->c;
	__u32 avail, want, have = c->have & (MY_HEAD - 1), plen;
	__s32 start = (__s32)w->off - (__s32)have; /* where the packet starts, possibly in the last send */

	if (w->off >= w->n)
		return 1;
	if (c->carry) { /* the rest of a packet begun in an earlier send */
		avail = w->n - w->off;
		if (c->carry >= avail) {
			c->carry -= avail;
			w->off = w->n;
			return 1;
		}
		w->off += c->carry;
		c->carry = 0;
		return 0;
	}
	/* The head: what the last send left, then this send's bytes. */
	if (have)
		__builtin_memcpy(head, c->head, MY_HEAD);
	avail = w->n - w->off;
	want = MY_HEAD - have;
	if (want > avail)
		want = avail;
	want &= 2 * MY_HEAD - 1;
	if (bpf_probe_read_user(head + have, want, w->buf + w->off))
		return 1;
	if (have + want < 5) { /* not even the header and kind: keep them for the next send */
		__builtin_memcpy(c->head, head, MY_HEAD);
		c->have = have + want;
		w->off = w->n;
		return 1;
	}
	plen = le24(head);
	/* A head split across sends whose payload is shorter than the head
	 * needs is complete once the packet is; else wait for the rest. */
	if (have + want < MY_HEAD && have + want < plen + 4 && w->off + want >= w->n) {
		__builtin_memcpy(c->head, head, MY_HEAD);
		c->have = have + want;
		w->off = w->n;
		return 1;
	}
	c->have = 0;
	/* The packet's end, from where it started. */
	if ((__s64)start + 4 + plen > w->n) {
		c->carry = start + 4 + plen - w->n;
		w->off = w->n;
	} else {
		w->off = start + 4 + plen;
	}
	if (my_packet(c, head + 4, plen)) {
		w->ended = 1;
		return 1;
	}
	return c->part == PART_ROWS; /* rows: their end is found at a send's tail (my_rows_end) */
}

/* Where a reply to cmd starts. */
static __always_inline __u8 first_part(__u8 cmd)
{
	switch (cmd) {
	case COM_STMT_FETCH: /* rows, then EOF */
	case COM_FIELD_LIST: /* column definitions, then EOF */
		return PART_ROWS;
	case COM_CHANGE_USER:
		return PART_AUTH;
	}
	return PART_FIRST;
}

/* No query runs after all: the thread's query is dropped, uncounted. */
static __always_inline void my_cancel(struct thread_state *ts, struct waterfall *wf)
{
	if (ts)
		ts->query_start_ns = 0;
	if (wf)
		wf->in_query = 0;
}

/* Which commands count as queries, and which teach Go (a statement's
 * text and id, the connection's user and database, its end). */
static __always_inline int my_ran(__u8 cmd)
{
	return cmd == COM_QUERY || cmd == COM_STMT_EXECUTE || cmd == COM_STMT_BULK_EXECUTE;
}

/* A command whose time is a statement's, or a part of one: a cursor's
 * COM_STMT_FETCH reads on from the COM_STMT_EXECUTE that opened it (which
 * counts the statement, as the server does). */
static __always_inline int my_timed(__u8 cmd)
{
	return my_ran(cmd) || cmd == COM_STMT_FETCH;
}

static __always_inline int my_teaches(__u8 cmd)
{
	return cmd == COM_STMT_PREPARE || cmd == COM_INIT_DB || cmd == COM_CHANGE_USER || cmd == COM_QUIT || cmd == 0;
}

/* How the reply to connection sk's command ended, now. */
static __always_inline struct my_reply my_reply_of(struct my_conn *c, __u64 sk)
{
	struct my_reply r = {
		.end_ns = bpf_ktime_get_ns(),
		.conn = c->conn ? c->conn : sk,
		.reply_id = c->reply_id,
		.statements = my_ran(c->cmd) ? 1 + c->results : 0,
		.cmd = c->cmd,
	};
	return r;
}

/* The record goes out with the command's first n bytes from text. */
static __always_inline void my_submit(struct query_event *e, struct my_reply *r, const char *text, __u32 n,
				      int truncated)
{
	n = text_bound(n);
	if (n && bpf_probe_read_kernel(e->text, n, text))
		n = 0;
	e->text_kind = TEXT_MYSQL;
	e->conn = r->conn;
	e->reply_id = r->reply_id;
	query_submit(e, n, truncated);
}

/* The record parked for connection sk, if any, ended by reply r, goes out. */
static __always_inline int my_end_parked(struct my_reply *r, __u64 sk)
{
	struct my_parked *p = bpf_map_lookup_elem(&my_parked, &sk);
	__u32 zero = 0;
	struct query_event *e = bpf_map_lookup_elem(&query_scratch, &zero);
	struct query_ending how = {
		.statements = r->statements,
		.timed = my_timed(r->cmd),
		.teaches = my_teaches(r->cmd),
	};

	if (!p)
		return 0;
	if (!e || bpf_probe_read_kernel(e, sizeof(p->head), p->head))
		goto out;
	e->end_ns = r->end_ns;
	e->acct.box_ns[BOX_AIO_WAIT] += r->end_ns - p->parked_ns;
	e->emit_flags = query_counted(&e->acct, e->start_ns, r->end_ns, &how);
	e->statements = how.statements;
	if (e->emit_flags)
		my_submit(e, r, p->text, p->text_len, p->truncated);
out:
	bpf_map_delete_elem(&my_parked, &sk);
	return 1;
}

/*
 * The owner parking connection sk's record and the thread sending its
 * reply meet: each writes its half (the record in my_parked, the reply in
 * my_replies), then, past a full barrier, looks for the other's. At least
 * one of them sees both; deleting the reply decides which ends the record.
 */
static __always_inline void my_handoff(__u64 sk)
{
	struct my_reply *found, r;

	__sync_fetch_and_add(&my_fence, 1);
	if (!bpf_map_lookup_elem(&my_parked, &sk) || !(found = bpf_map_lookup_elem(&my_replies, &sk)))
		return;
	r = *found;
	if (!bpf_map_delete_elem(&my_replies, &sk))
		my_end_parked(&r, sk);
}

/*
 * Another thread ends connection sk's query in its owner's stead: a
 * thread pool's worker sends the reply while the owner sleeps, or is just
 * taking another connection's command. The owner's state is only read,
 * into the per-CPU record, and the query claimed after that: a
 * compare-and-swap on the start seen with its connection (my_end). If the
 * owner ended it first, or began another, nothing is taken; if this
 * thread takes it, the owner begins its next query only after, so what
 * was read is this query's.
 */
static __always_inline struct query_event *my_take(struct thread_state *ts, struct waterfall *wf, __u64 start,
						   __u64 now)
{
	__u32 zero = 0, tag = 0, event = 0, version = 0;
	struct query_event *e = bpf_map_lookup_elem(&query_scratch, &zero);
	__u64 sleep = 0;
	__u8 box = 0;

	if (!e)
		return NULL;
	e->acct = ts->acct;
	if (ts->blk_inflight && ts->blk_busy_since) /* requests outliving the query */
		e->acct.blk_busy_ns += now - ts->blk_busy_since;
	__builtin_memset(e->waits, 0, sizeof(e->waits));
	if (wf) {
		tag = wf->in_query;
		__builtin_memcpy(e->acct.box_ns, wf->box_ns, sizeof(e->acct.box_ns));
		__builtin_memcpy(e->waits, wf->waits, sizeof(e->waits));
		if (wf->oncpu_since) {
			e->acct.box_ns[BOX_CPU] += now - wf->oncpu_since;
		} else if (wf->offcpu_since && wf->asleep) {
			sleep = now - wf->offcpu_since;
			box = wf->asleep_box;
			event = wf->wait_event;
			version = wf->wait_version;
			add_sleep(e->acct.box_ns, e->waits, box, event, sleep);
		} else if (wf->offcpu_since) { /* waits for a CPU */
			e->acct.box_ns[BOX_RUNQ] += now - wf->offcpu_since;
		}
	}
	if (!__sync_bool_compare_and_swap(&ts->query_start_ns, start, 0))
		return NULL;
	/* Its waterfall closes, unless the owner began another already: its
	 * switch-in would charge the sleep to the histograms once more. */
	if (tag && __sync_bool_compare_and_swap(&wf->in_query, tag, 0) && sleep)
		hist_sleep(box, version, event, sleep);
	query_fill(e, ts, start, now, EMIT_STATEMENT);
	return e;
}

/*
 * A thread leaves the query of connection sk before its reply: task, the
 * query's owner, to take another connection's command (start 0), or
 * another thread, sending the reply, in its stead (start: the query's).
 * The record, complete but for the wait for the reply, waits in my_parked.
 */
static __always_inline void my_park(struct task_struct *task, struct thread_state *ts, struct waterfall *wf,
				    __u64 sk, __u64 start)
{
	struct wire_text *t = bpf_task_storage_get(&wire_texts, task, 0, 0);
	__u32 zero = 0;
	struct my_parked *p = bpf_map_lookup_elem(&my_parking, &zero);
	struct query_event *e;
	__u64 now = bpf_ktime_get_ns();

	if (!p)
		return;
	/* The text first: once the query is taken, its owner may begin the
	 * next command and write over it. */
	p->text_len = 0;
	p->truncated = 0;
	if (t && t->len) {
		p->text_len = t->len < MY_PARKED_TEXT ? t->len : MY_PARKED_TEXT;
		p->truncated = t->truncated || t->len > MY_PARKED_TEXT;
		bpf_probe_read_kernel(p->text, sizeof(p->text), t->buf);
	}
	/* A record whatever the thresholds: they are applied at the reply. */
	e = start ? my_take(ts, wf, start, now) : query_end(ts, wf, now, (struct query_ending){.teaches = 1});
	if (!e) /* another thread ended it first */
		return;
	e->pid = task->pid;
	bpf_probe_read_kernel(p->head, sizeof(p->head), e);
	p->parked_ns = now;
	if (bpf_map_update_elem(&my_parked, &sk, p, BPF_ANY)) {
		stat_inc(STAT_MYSQL_CONN_FULL);
		return;
	}
	if (!start) /* its reply may have ended while it parked */
		my_handoff(sk);
}

/*
 * The reply ended (or was cut short by the next command): the record goes
 * out. Usually the thread that ran the command sends it; in a thread pool
 * another thread may, and the query is then ended in its owner's stead.
 * lib: called from a uprobe (the TLS library's), which cannot reach
 * another task (no bpf_task_from_pid): a query its owner still runs is
 * dropped there. Replies are sent from the socket tracepoint, so only a
 * reply's end missed until the next command (counted) comes this way.
 */
static __always_inline void my_end(struct task_struct *task, struct task_local *tl, struct my_conn *c, __u64 sk,
				   int lib)
{
	struct thread_state *ts = thread_current();
	struct task_struct *owner;
	struct task_local *otl;
	struct query_event *e;
	struct wire_text *t;
	struct my_reply r = my_reply_of(c, sk);
	__u64 start;

	c->state = MY_IDLE;
	if (ts && ts->query_start_ns && ts->mysql_conn == sk) {
		e = query_end(ts, &tl->wf, r.end_ns,
			      (struct query_ending){.statements = r.statements, .timed = my_timed(r.cmd), .teaches = my_teaches(r.cmd)});
		if (!e)
			return;
		t = bpf_task_storage_get(&wire_texts, task, 0, 0);
		my_submit(e, &r, t ? t->buf : NULL, t ? t->len : 0, t && t->truncated);
		return;
	}
	/* Another thread's query: still its owner's, parked already, or
	 * being parked by its owner now. The start is read before the
	 * connection, which my_begin writes before the start. */
	ts = thread_of(c->owner);
	start = ts ? ts->query_start_ns : 0;
	barrier();
	if (start && ts->mysql_conn == sk) {
		if (lib) {
			__sync_bool_compare_and_swap(&ts->query_start_ns, start, 0);
		} else if ((owner = bpf_task_from_pid(c->owner))) {
			otl = task_local_of(owner);
			my_park(owner, ts, otl ? &otl->wf : NULL, sk, start);
			bpf_task_release(owner);
		}
	}
	if (my_end_parked(&r, sk))
		return;
	bpf_map_update_elem(&my_replies, &sk, &r, BPF_ANY);
	my_handoff(sk);
}

/*
 * The tail of a send, for an ERR packet ending it: 0xff, the error code, '#'
 * and the SQL state, the message. No row starts with 0xff (not a
 * length-encoded string's first byte), so a packet of length len ending
 * the send and starting so is the ERR. Messages up to MY_ERR_TAIL bytes
 * are found; a longer one ends its query at the next command, counted.
 */
#define MY_ERR_TAIL 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[MY_ERR_TAIL]);
} my_tail SEC(".maps");

/* The scan of a tail of m bytes (in my_tail) for the ERR, one packet
 * length (9 on: code, '#', state) per round: its own loop, as the walk's. */
struct my_err_scan {
	__u32 m;
	__u32 found;
};

static int my_err_at(__u32 i, struct my_err_scan *s)
{
	__u32 zero = 0, len = 9 + i, at;
	__u8 *tail = bpf_map_lookup_elem(&my_tail, &zero);

	if (!tail || len + 4 > s->m)
		return 1;
	at = (s->m - len - 4) & (MY_ERR_TAIL - 1);
	if (at + 8 <= MY_ERR_TAIL && le24(tail + at) == len && tail[at + 4] == 0xff && tail[at + 7] == '#') {
		s->found = 1;
		return 1;
	}
	return 0;
}

static __always_inline int my_rows_err(struct my_conn *c, void *buf, __u32 from, __u32 n)
{
	__u32 zero = 0;
	struct my_err_scan s = { .m = n - from };
	__u8 *tail = bpf_map_lookup_elem(&my_tail, &zero);

	if (!tail || from >= n)
		return 0;
	if (s.m > MY_ERR_TAIL)
		s.m = MY_ERR_TAIL;
	if (bpf_probe_read_user(tail, s.m & (2 * MY_ERR_TAIL - 1), buf + n - s.m))
		return 0;
	bpf_loop(MY_ERR_TAIL - 12, my_err_at, &s, 0);
	if (s.found)
		c->carry = c->have = 0;
	return s.found;
}

/*
 * A result's rows are not walked one by one (a 100-row range is 100
 * packets): the reply ends with a send whose last packet is the EOF or
 * the OK after them, so each send's tail from `from` on is checked for
 * one: a classic EOF is 9 bytes (length 5, 0xfe, warnings, status); an OK
 * in its place (CLIENT_DEPRECATE_EOF) starts with 0xfe too, of a length
 * from 7 on. An error in place of the rest of the rows (a statement
 * killed, or failing at a row) is an ERR packet at the tail (my_rows_err).
 * 1 when the reply ended; with "more results exist" the next result
 * follows.
 */
static __always_inline int my_rows_end(struct my_conn *c, void *buf, __u32 from, __u32 n)
{
	__u8 tail[2 * MY_HEAD] = {};
	__u32 m = n - from, len, at;
	const __u8 *p;

	if (from >= n)
		return 0;
	if (m > MY_HEAD)
		m = MY_HEAD;
	if (bpf_probe_read_user(tail, m & (2 * MY_HEAD - 1), buf + n - m))
		return 0;
	for (len = 5; len <= MY_HEAD - 4; len++) {
		if (len == 6 || len + 4 > m)
			continue;
		at = (m - len - 4) & (MY_HEAD - 1);
		p = tail + at;
		if (p[0] != len || p[1] || p[2] || p[4] != 0xfe)
			continue;
		if (len >= 7)
			c->flags |= MY_NO_EOF;
		c->carry = c->have = 0;
		if (status_of(p + 4, len) & SERVER_MORE_RESULTS_EXIST) {
			c->part = PART_FIRST;
			c->results++;
			return 0;
		}
		return 1;
	}
	return my_rows_err(c, buf, from, n);
}

/* The server sends n bytes from buf on a connection. */
static __always_inline void my_sent(struct task_struct *task, struct task_local *tl, struct my_conn *c,
				    __u64 sk, void *buf, __u32 n)
{
	struct my_walk w = { .buf = buf, .n = n };
	__u8 hello[64] = {};
	__u32 i;

	if (c->state == MY_UNSEEN) {
		/* A new connection's greeting: protocol 10, the server's version
		 * (NUL-terminated), the connection id. */
		__u32 m = n < sizeof(hello) ? n : sizeof(hello);

		if (m < 16 || bpf_probe_read_user(hello, m, buf) || hello[3] != 0 || hello[4] != 10)
			return;
		for (i = 5; i + 4 < m; i++)
			if (!hello[i]) {
				c->conn = le32(hello + i + 1);
				c->state = MY_GREETED;
				return;
			}
		return;
	}
	if (c->state != MY_BUSY)
		return;
	w.c = *c;
	if (c->part == PART_ROWS) { /* rows since an earlier send: past the packet it ended in */
		w.off = c->carry < n ? c->carry : n;
		w.c.carry -= w.off;
	} else {
		bpf_loop(MY_MAX_HOPS, my_hop, &w, 0);
	}
	if (!w.ended && w.c.part == PART_ROWS)
		w.ended = my_rows_end(&w.c, buf, w.off, n);
	*c = w.c;
	if (w.ended) {
		c->carry = c->have = 0;
		my_end(task, tl, c, sk, 0);
	}
}

/*
 * The thread's query begins: a command's, or the handshake's, on
 * connection sk. A query it left before its reply (a thread pool's
 * worker does, for a COMMIT) waits for the reply in my_parked.
 */
static __always_inline void my_begin(struct task_struct *task, struct task_local *tl, struct my_conn *c, __u64 sk)
{
	struct thread_state *ts = thread_current();

	if (!ts)
		return;
	/* What is left of the connection's last command: a record whose
	 * reply was never seen, a reply whose record was never parked. */
	if (!bpf_map_delete_elem(&my_parked, &sk))
		stat_inc(STAT_QUERY_UNFINISHED);
	bpf_map_delete_elem(&my_replies, &sk);
	if (ts->query_start_ns && ts->mysql_conn != sk)
		my_park(task, ts, &tl->wf, ts->mysql_conn, 0);
	ts->mysql_conn = sk;
	c->owner = task->pid;
	barrier(); /* the connection, then the start (my_end) */
	query_begin(ts, &tl->wf, bpf_ktime_get_ns());
}

/*
 * A command's payload arrives: its first n bytes at payload (of len). The
 * thread's query began at its header.
 */
static __always_inline void my_command(struct task_struct *task, struct task_local *tl, struct my_conn *c,
				       __u64 sk, void *payload, __u32 n, __u32 len, int lib)
{
	struct wire_text *t = bpf_task_storage_get(&wire_texts, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u32 m = text_bound(n < len ? n : len);

	c->carry = c->have = 0;
	c->reply_id = c->results = 0;
	if (!t || !m || bpf_probe_read_user(t->buf, m, payload)) {
		stat_inc(STAT_WIRE_UNREADABLE);
		my_cancel(thread_current(), &tl->wf);
		c->state = MY_IDLE;
		return;
	}
	t->len = m;
	t->truncated = len > m;
	c->cmd = (__u8)t->buf[0];
	c->part = first_part(c->cmd);
	c->state = MY_BUSY;
	switch (c->cmd) {
	case COM_STMT_CLOSE:          /* no reply */
	case COM_STMT_SEND_LONG_DATA: /* no reply */
		my_cancel(thread_current(), &tl->wf);
		c->state = MY_IDLE;
		break;
	case COM_QUIT: /* Go forgets the connection */
		my_end(task, tl, c, sk, lib);
		c->state = MY_OFF;
		break;
	case COM_BINLOG_DUMP: /* a replica's stream: never ends */
	case COM_BINLOG_DUMP_GTID:
	case COM_REGISTER_SLAVE:
		my_cancel(thread_current(), &tl->wf);
		c->state = MY_OFF;
		break;
	}
}

/*
 * An SSLRequest on a socket: TLS follows. Read in plaintext at the library
 * when the process's is probed (proc_info), else not followed (counted).
 */
static __always_inline void my_tls_begins(struct task_struct *task, struct my_conn *c)
{
	__u32 tgid = task->tgid;
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &tgid);

	if (pi && (pi->flags & PROC_TLS_PROBED)) {
		c->state = MY_TLS;
		c->flags |= MY_TLS_NEW;
		stat_inc(STAT_WIRE_TLS);
		return;
	}
	stat_inc(STAT_WIRE_ENCRYPTED);
	c->state = MY_OFF;
}

/*
 * The handshake response, the client's first packet (sequence 1; 2 over
 * TLS, after the SSLRequest): Go learns the user and database from it.
 * Its record carries it behind a command byte 0 (COM_SLEEP, which no
 * client sends); the query it makes is the authentication, which ends
 * with the server's OK or ERR. tls: read at the TLS library.
 */
static __always_inline void my_handshake(struct task_struct *task, struct task_local *tl, struct my_conn *c,
					 __u64 sk, void *payload, __u32 n, __u32 len, int tls)
{
	struct wire_text *t;
	__u8 caps_le[4];
	__u32 caps, m;

	if (n < 4 || bpf_probe_read_user(caps_le, sizeof(caps_le), payload))
		return;
	caps = le32(caps_le);
	if ((caps & CLIENT_SSL) && !tls) { /* an SSLRequest: TLS follows */
		my_tls_begins(task, c);
		return;
	}
	if (caps & CLIENT_DEPRECATE_EOF)
		c->flags |= MY_NO_EOF;
	t = bpf_task_storage_get(&wire_texts, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	m = text_bound(n < len ? n : len);
	if (m > TEXT_MASK - 1)
		m = TEXT_MASK - 1;
	if (!t || !m || bpf_probe_read_user(t->buf + 1, m, payload))
		return;
	t->buf[0] = 0;
	t->len = m + 1;
	t->truncated = len > m;
	my_begin(task, tl, c, sk);
	c->cmd = 0;
	c->part = PART_AUTH;
	c->carry = c->have = 0;
	c->state = MY_BUSY;
}

/* A command begins to be read: the connection's query begins. */
static __always_inline void my_command_begins(struct task_struct *task, struct task_local *tl, struct my_conn *c,
					      __u64 sk, int lib)
{
	if (c->state == MY_BUSY) { /* the last reply's end was missed: it ends here */
		stat_inc(STAT_MYSQL_REPLY_UNSEEN);
		my_end(task, tl, c, sk, lib);
	}
	my_begin(task, tl, c, sk);
}

/*
 * A client packet: its header said seq and len, and n bytes of its payload
 * are at payload. begun: a command's header came alone, its query began.
 */
static __always_inline void my_client_packet(struct task_struct *task, struct task_local *tl, struct my_conn *c,
					     __u64 sk, __u8 seq, __u32 len, void *payload, __u32 n, int begun, int lib)
{
	c->cmd_left = len > n ? len - n : 0;
	if (c->state == MY_GREETED) {
		if (seq == 1 || seq == 2)
			my_handshake(task, tl, c, sk, payload, n, len, seq == 2);
		return;
	}
	/* A command has sequence 0; anything else (the rest of an auth
	 * exchange, a LOCAL INFILE's data) is part of the reply under way. */
	if (seq != 0 || !len || !n)
		return;
	if (!begun)
		my_command_begins(task, tl, c, sk, lib);
	my_command(task, tl, c, sk, payload, n, len, lib);
}

/* The server read n bytes from a connection into buf (lib: see my_end). */
static __always_inline void my_received(struct task_struct *task, struct task_local *tl, struct my_conn *c,
					__u64 sk, void *buf, __u32 n, int lib)
{
	__u8 hdr[4];

	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	if (c->state == MY_OFF)
		return;
	if (c->in_header) { /* the payload of the packet whose header came alone */
		c->in_header = 0;
		my_client_packet(task, tl, c, sk, c->in_seq, c->in_len, buf, n,
				 c->in_seq == 0 && c->state != MY_GREETED, lib);
		return;
	}
	if (c->cmd_left) { /* more of a long packet */
		c->cmd_left -= n < c->cmd_left ? n : c->cmd_left;
		return;
	}
	if (n < 4 || bpf_probe_read_user(hdr, sizeof(hdr), buf))
		return;
	if (n == 4) { /* the server reads the header first, then the payload */
		c->in_seq = hdr[3];
		c->in_len = le24(hdr);
		c->in_header = 1;
		if (c->in_seq == 0 && c->state != MY_GREETED && c->in_len)
			my_command_begins(task, tl, c, sk, lib); /* its query begins as the server reads it */
		return;
	}
	my_client_packet(task, tl, c, sk, hdr[3], le24(hdr), buf + 4, n - 4, 0, lib);
}

/*
 * The hooks were detached for a while (duty cycles): the connection's
 * packets went unseen, so it waits for the client's next command, as one
 * older than the trace; a reply in progress is not followed.
 */
static __always_inline struct my_conn *my_resync(struct my_conn *c)
{
	if (c->synced_ns == resync_ns)
		return c;
	c->synced_ns = resync_ns;
	if (c->state == MY_GREETED || c->state == MY_IDLE || c->state == MY_BUSY) {
		c->state = MY_IDLE;
		c->carry = c->left = c->cmd_left = 0;
		c->have = c->in_header = 0;
		c->part = PART_FIRST;
	}
	return c;
}

/* The connection of a socket call of a MySQL thread; NULL for any other. */
static __always_inline struct my_conn *my_conn_of(struct task_struct *task, struct sock *sk, struct task_local **tl)
{
	struct my_conn *c;

	*tl = task_local_of(task);
	if (!*tl || (*tl)->wire.state != WIRE_MYSQL)
		return NULL;
	c = bpf_sk_storage_get(&my_conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		stat_inc(STAT_MYSQL_CONN_FULL);
		return NULL;
	}
	return my_resync(c);
}

/*
 * The thread reads ciphertext inside SSL_read: the socket carries TLS
 * from here on (a connection older than the trace is found so), and the
 * library connection learns its socket: a new one, after its SSLRequest,
 * starts where the greeting left the socket; an SSL * that served another
 * socket before was freed and reused.
 */
static __always_inline void my_tls_link(struct task_struct *task, struct task_local *tl, struct my_conn *c,
					__u64 sk)
{
	struct my_tls_key key = { .tgid = task->tgid, .ssl = tl->wire.tls_ssl };
	struct my_tls_conn *t = bpf_map_lookup_elem(&my_tls_conns, &key);
	struct my_tls_conn fresh = {};

	if (c->state != MY_TLS) {
		c->state = MY_TLS;
		stat_inc(STAT_WIRE_TLS);
	}
	if (t && t->sk == sk && !(c->flags & MY_TLS_NEW))
		return;
	fresh.sk = sk;
	if (c->flags & MY_TLS_NEW) {
		fresh.c.conn = c->conn;
		fresh.c.state = MY_GREETED;
		c->flags &= ~MY_TLS_NEW;
	}
	if (bpf_map_update_elem(&my_tls_conns, &key, &fresh, BPF_ANY))
		stat_inc(STAT_MYSQL_CONN_FULL);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(mysql_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct my_conn *c;

	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	task = bpf_get_current_task_btf();
	c = my_conn_of(task, sk, &tl);
	if (!c)
		return 0;
	if (tl->wire.tls_ssl) /* inside SSL_read: ciphertext */
		my_tls_link(task, tl, c, (__u64)sk);
	else if (c->state != MY_TLS)
		my_received(task, tl, c, (__u64)sk, sock_buf(task), ret, 0);
	return 0;
}

/*
 * The first send inside the thread's SSL_write: the plaintext its entry
 * noted is read now, in the tracepoint, where a reply another thread's
 * query waits for can end it (my_end); NULL when the library connection
 * is not followed (not read yet: older than the trace, found at its next
 * read) or another socket's (a stale note).
 */
static __always_inline struct my_conn *my_tls_sending(struct task_struct *task, struct task_local *tl, __u64 sk,
						       void **buf, __u32 *n)
{
	struct my_tls_key key = { .tgid = task->tgid, .ssl = tl->wire.tls_ssl };
	struct my_tls_conn *t;

	*buf = (void *)tl->wire.tls_buf;
	*n = tl->wire.tls_len;
	tl->wire.tls_ssl = tl->wire.tls_buf = 0; /* the write's next sends are ciphertext only */
	tl->wire.tls_len = 0;
	t = bpf_map_lookup_elem(&my_tls_conns, &key);
	if (!t || t->sk != sk)
		return NULL;
	return my_resync(&t->c);
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(mysql_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct my_conn *c;
	void *buf;
	__u32 n = ret;

	if (ret <= 0)
		return 0;
	task = bpf_get_current_task_btf();
	c = my_conn_of(task, sk, &tl);
	if (!c)
		return 0;
	if (tl->wire.tls_ssl) { /* inside SSL_read or SSL_write: ciphertext */
		if (!tl->wire.tls_len || !(c = my_tls_sending(task, tl, (__u64)sk, &buf, &n)))
			return 0;
	} else if (c->state == MY_TLS) {
		return 0;
	} else {
		buf = sock_buf(task);
	}
	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return 0;
	}
	my_sent(task, tl, c, (__u64)sk, buf, n);
	return 0;
}

/*
 * TLS connections in plaintext, at the TLS library (OpenSSL's SSL_read and
 * SSL_write, int f(SSL *, void *buf, int num)), in a MySQL server's threads
 * only (wire.bpf.c's programs take PostgreSQL's on the same library).
 * Each call's entry notes it in the thread's state. SSL_read: the socket
 * read inside it, if any, links its SSL * to the socket (my_tls_link);
 * its return reads the plaintext. SSL_write: its first send reads the
 * plaintext (my_tls_sending), so no return probe is needed.
 */
SEC("uprobe")
int mysql_tls_read(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());

	if (!tl || tl->wire.state != WIRE_MYSQL)
		return 0;
	tl->wire.tls_ssl = PT_REGS_PARM1(ctx);
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	tl->wire.tls_len = 0;
	return 0;
}

SEC("uretprobe")
int mysql_tls_read_done(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = task_local_of(task);
	struct my_tls_key key = { .tgid = task->tgid };
	struct my_tls_conn *t;
	int ret = PT_REGS_RC(ctx);
	void *buf;

	if (!tl || tl->wire.state != WIRE_MYSQL || !tl->wire.tls_ssl || tl->wire.tls_len)
		return 0;
	key.ssl = tl->wire.tls_ssl;
	buf = (void *)tl->wire.tls_buf;
	tl->wire.tls_ssl = tl->wire.tls_buf = 0;
	if (ret <= 0 || !(t = bpf_map_lookup_elem(&my_tls_conns, &key)))
		return 0;
	my_received(task, tl, my_resync(&t->c), t->sk, buf, ret, 1);
	if (t->c.state == MY_OFF && t->c.cmd == COM_QUIT) /* the client left: so does its state */
		bpf_map_delete_elem(&my_tls_conns, &key);
	return 0;
}

SEC("uprobe")
int mysql_tls_write(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());
	int num = PT_REGS_PARM3(ctx);

	if (!tl || tl->wire.state != WIRE_MYSQL || num <= 0)
		return 0;
	tl->wire.tls_ssl = PT_REGS_PARM1(ctx);
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	tl->wire.tls_len = num;
	return 0;
}
