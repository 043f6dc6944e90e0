/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which thread ends a connection's query, and how do two threads agree on
 * its one record? A query begins in the thread that reads its command
 * (mysql_begin) and usually ends in the same thread, at its reply (mysql_end).
 * In MariaDB's thread pool it may not: the worker that ran a COMMIT takes
 * other connections' commands while the redo log is written, and whichever
 * worker resumes the connection sends the OK. The query's accounting is
 * its owner's (thread_state, waterfall); the record waits in mysql_parked, by
 * connection, for the reply.
 *
 * Two threads may end one query at once: its owner, leaving it for another
 * connection's command, and the thread sending its reply. The protocol,
 * step by step:
 *
 * 1. The owner begins the query: it writes the connection into its state
 *    (thread_state.mysql_conn, and itself as the connection's owner), then,
 *    past a compiler barrier, the query's start (query_start_ns). Whoever
 *    sees the start sees the connection it belongs to.
 * 2. The owner leaving the query claims it by an atomic exchange of its
 *    start with 0 (query_end): a nonzero start taken means the query is
 *    the owner's to record; 0 means another thread took it.
 * 3. The thread sending the reply, finding the query not its own, reads
 *    the owner's start, then its connection; if the owner still runs this
 *    connection's query, it reads the owner's state (accounting, waterfall
 *    so far) into its own per-CPU record, and only then claims the query by
 *    a compare-and-swap of the start it saw with 0 (mysql_take). The swap
 *    fails if the owner took the query first or began another (its start
 *    changed): nothing is taken. If it succeeds, the owner can begin its
 *    next query only after, so what was read was this query's. Its
 *    waterfall is closed by a second compare-and-swap, on the tag of the
 *    query it read (waterfall.in_query), so a next query begun meanwhile
 *    stays open. (From a uprobe, the TLS library's, which cannot reach
 *    another task, the swap only drops the query: see mysql_end.)
 * 4. Whichever claimed it writes the record, complete but for the wait
 *    for the reply, into mysql_parked (mysql_park). The reply's sender then
 *    finds it there and sends it at once (mysql_end_parked).
 * 5. A reply that ends while the owner is parking (between its claim in
 *    step 2 and the record landing in mysql_parked) finds no record: it
 *    leaves what ends it (struct mysql_reply) in mysql_replies. Both threads
 *    then meet in mysql_handoff: each has written its half (the record, the
 *    reply), passes a full barrier (a locked add on mysql_fence), and looks
 *    for both halves. At least one of them sees both; deleting the reply
 *    from mysql_replies succeeds for exactly one, which ends the record.
 *
 * The connection's next command clears what is left of the last: a record
 * whose reply was never seen (counted), a reply whose record never came.
 */
#ifndef MYSQL_HANDOFF_BPF_H
#define MYSQL_HANDOFF_BPF_H

#include "mysql_conn.bpf.h"
#include "pooler.bpf.h"

extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

/*
 * Queries whose thread left them before their reply: in MariaDB's thread
 * pool a COMMIT's OK is sent once the redo log is written, by whichever
 * worker resumes the connection, while the one that ran it takes other
 * connections' commands. The record waits here, by connection, for the
 * reply; the time in between is waiting for others' work (BOX_AIO_WAIT).
 */
#define MYSQL_PARKED_TEXT 512 /* the command's first bytes: a COM_STMT_EXECUTE's are few */
struct mysql_parked {
	__u8 head[__builtin_offsetof(struct query_event, text)]; /* the record but its text */
	__u64 parked_ns;
	__u32 text_len;
	__u32 truncated;
	char text[MYSQL_PARKED_TEXT];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64); /* the connection's socket */
	__type(value, struct mysql_parked);
} mysql_parked SEC(".maps");

/* Where a record is made whole before it goes into mysql_parked in one update:
 * the thread sending its reply may look it up at any moment. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mysql_parked);
} mysql_parking SEC(".maps");

/*
 * What ends a parked record, taken from the connection when its reply
 * ended. The owner parks between taking the query's start and the record
 * landing in mysql_parked; a reply ending in that window leaves this here for
 * the owner to find once it has parked (mysql_handoff).
 */
struct mysql_reply {
	__u64 end_ns;
	__u64 conn;
	__u32 reply_id;
	__u32 statements; /* the command's, if it ran any: one a result */
	__u8 cmd;
	__u8 stmt_kind; /* its statement's identity (struct mysql_conn's) */
	__u8 pad[6];
	__u64 stmt;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u64); /* the connection's socket */
	__type(value, struct mysql_reply);
} mysql_replies SEC(".maps");

/* Written by a locked instruction, a full barrier (mysql_handoff). */
volatile __u64 mysql_fence;

/*
 * Entries put into mysql_parked and mysql_replies and not deleted yet, or
 * more (counted before they are put, a replaced one twice, never less):
 * while none, a command's begin has nothing of the last to clear and skips
 * its two deletes (each takes its hash bucket's lock: about 110 ns a
 * statement together, on a server whose queries never park).
 */
volatile __u64 mysql_kept;

static __always_inline long mysql_keep(void *map, __u64 sk, void *v)
{
	__sync_fetch_and_add(&mysql_kept, 1);
	return bpf_map_update_elem(map, &sk, v, BPF_ANY);
}

static __always_inline long mysql_forget(void *map, __u64 sk)
{
	long err = bpf_map_delete_elem(map, &sk);

	if (!err)
		__sync_fetch_and_add(&mysql_kept, -1);
	return err;
}

/* No query runs after all: the thread's query is dropped, uncounted. */
static __always_inline void mysql_cancel(struct thread_state *ts, struct waterfall *wf)
{
	if (ts)
		ts->query_start_ns = 0;
	if (wf)
		wf->in_query = 0;
}

/* Which commands count as queries, and which teach Go (a statement's
 * text and id, the connection's user and database, its end). */
static __always_inline int mysql_ran(__u8 cmd)
{
	return cmd == COM_QUERY || cmd == COM_STMT_EXECUTE || cmd == COM_STMT_BULK_EXECUTE;
}

/* A command whose time is a statement's, or a part of one: a cursor's
 * COM_STMT_FETCH reads on from the COM_STMT_EXECUTE that opened it (which
 * counts the statement, as the server does). */
static __always_inline int mysql_timed(__u8 cmd)
{
	return mysql_ran(cmd) || cmd == COM_STMT_FETCH;
}

static __always_inline int mysql_teaches(__u8 cmd)
{
	return cmd == COM_STMT_PREPARE || cmd == COM_INIT_DB || cmd == COM_CHANGE_USER || cmd == COM_QUIT || cmd == 0;
}

/* How the reply to connection sk's command ended, now. */
static __always_inline struct mysql_reply mysql_reply_of(struct mysql_conn *c, __u64 sk)
{
	struct mysql_reply r = {
		.end_ns = bpf_ktime_get_ns(),
		.conn = c->conn ? c->conn : sk,
		.reply_id = c->reply_id,
		.statements = mysql_ran(c->cmd) ? 1 + c->results : 0,
		.cmd = c->cmd,
		.stmt_kind = c->stmt_kind,
		.stmt = c->stmt,
	};
	return r;
}

/* The record of connection sk goes out with the command's first n bytes from text. */
static __always_inline void mysql_submit(struct query_event *e, struct mysql_reply *r, __u64 sk, const char *text,
				      __u32 n, int truncated)
{
	n = text_bound(n);
	if (n && bpf_probe_read_kernel(e->text, n, text))
		n = 0;
	e->text_kind = TEXT_MYSQL;
	e->conn = r->conn;
	e->reply_id = r->reply_id;
	pooled_conn_record(e, sk);
	query_submit(e, n, truncated);
}

/* The record parked for connection sk, if any, ended by reply r, goes out. */
static __always_inline int mysql_end_parked(struct mysql_reply *r, __u64 sk)
{
	struct mysql_parked *p = bpf_map_lookup_elem(&mysql_parked, &sk);
	__u32 zero = 0;
	struct query_event *e = bpf_map_lookup_elem(&query_scratch, &zero);
	struct query_ending how = {
		.statements = r->statements,
		.timed = mysql_timed(r->cmd),
		.teaches = mysql_teaches(r->cmd),
		.single = 1,
		.stmt = {.queryid = r->stmt, .kind = r->stmt_kind},
	};

	if (!p)
		return 0;
	if (!e || bpf_probe_read_kernel(e, sizeof(p->head), p->head))
		goto out;
	e->end_ns = r->end_ns;
	e->acct.box_ns[BOX_AIO_WAIT] += r->end_ns - p->parked_ns;
	e->emit_flags = query_counted(&e->acct, e->start_ns, r->end_ns, &how);
	e->statements = how.statements;
	e->stmt = how.stmt;
	if (e->emit_flags & ~EMIT_COUNTED)
		mysql_submit(e, r, sk, p->text, p->text_len, p->truncated);
out:
	mysql_forget(&mysql_parked, sk);
	return 1;
}

/*
 * The owner parking connection sk's record and the thread sending its
 * reply meet: each writes its half (the record in mysql_parked, the reply in
 * mysql_replies), then, past a full barrier, looks for the other's. At least
 * one of them sees both; deleting the reply decides which ends the record.
 */
static __always_inline void mysql_handoff(__u64 sk)
{
	struct mysql_reply *found, r;

	__sync_fetch_and_add(&mysql_fence, 1);
	if (!bpf_map_lookup_elem(&mysql_parked, &sk) || !(found = bpf_map_lookup_elem(&mysql_replies, &sk)))
		return;
	r = *found;
	if (!mysql_forget(&mysql_replies, sk))
		mysql_end_parked(&r, sk);
}

/*
 * Another thread ends connection sk's query in its owner's stead: a
 * thread pool's worker sends the reply while the owner sleeps, or is just
 * taking another connection's command. The owner's state is only read,
 * into the per-CPU record, and the query claimed after that: a
 * compare-and-swap on the start seen with its connection (mysql_end). If the
 * owner ended it first, or began another, nothing is taken; if this
 * thread takes it, the owner begins its next query only after, so what
 * was read is this query's.
 */
static __always_inline struct query_event *mysql_take(struct thread_state *ts, struct waterfall *wf, __u64 start,
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
		e->acct.runq_engine_ns = wf->runq_engine_ns;
		e->acct.runq_waits = wf->runq_waits;
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
 * The record, complete but for the wait for the reply, waits in mysql_parked.
 */
static __always_inline void mysql_park(struct task_struct *task, struct thread_state *ts, struct waterfall *wf,
				    __u64 sk, __u64 start)
{
	struct capture *t = bpf_task_storage_get(&captures, task, 0, 0);
	__u32 zero = 0;
	struct mysql_parked *p = bpf_map_lookup_elem(&mysql_parking, &zero);
	struct query_event *e;
	__u64 now = bpf_ktime_get_ns();

	if (!p)
		return;
	/* The text first: once the query is taken, its owner may begin the
	 * next command and write over it. */
	p->text_len = 0;
	p->truncated = 0;
	if (t && t->len) {
		p->text_len = t->len < MYSQL_PARKED_TEXT ? t->len : MYSQL_PARKED_TEXT;
		p->truncated = t->truncated || t->len > MYSQL_PARKED_TEXT;
		bpf_probe_read_kernel(p->text, sizeof(p->text), t->buf);
	}
	/* A record whatever the thresholds: they are applied at the reply. */
	e = start ? mysql_take(ts, wf, start, now) : query_end(ts, wf, now, (struct query_ending){.teaches = 1});
	if (!e) /* another thread ended it first */
		return;
	e->pid = task->pid;
	bpf_probe_read_kernel(p->head, sizeof(p->head), e);
	p->parked_ns = now;
	if (mysql_keep(&mysql_parked, sk, p)) {
		stat_inc(STAT_MYSQL_CONN_FULL);
		return;
	}
	if (!start) /* its reply may have ended while it parked */
		mysql_handoff(sk);
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
static __always_inline void mysql_end(struct task_struct *task, struct task_local *tl, struct mysql_conn *c, __u64 sk,
				   int lib)
{
	struct thread_state *ts = thread_in(tl);
	struct task_struct *owner;
	struct task_local *otl;
	struct query_event *e;
	struct capture *t;
	struct mysql_reply r = mysql_reply_of(c, sk);
	__u64 start;

	c->state = MYSQL_IDLE;
	if (ts && ts->query_start_ns && ts->mysql_conn == sk) {
		e = query_end(ts, &tl->wf, r.end_ns,
			      (struct query_ending){.statements = r.statements, .timed = mysql_timed(r.cmd), .teaches = mysql_teaches(r.cmd),
						    .single = 1,
						    .stmt = {.queryid = r.stmt, .kind = r.stmt_kind, .instance = tl->instance}});
		if (!e)
			return;
		t = bpf_task_storage_get(&captures, task, 0, 0);
		mysql_submit(e, &r, sk, t ? t->buf : NULL, t ? t->len : 0, t && t->truncated);
		return;
	}
	/* Another thread's query: still its owner's, parked already, or
	 * being parked by its owner now. The start is read before the
	 * connection, which mysql_begin writes before the start. */
	ts = thread_of(c->owner);
	start = ts ? ts->query_start_ns : 0;
	barrier();
	if (start && ts->mysql_conn == sk) {
		if (lib) {
			__sync_bool_compare_and_swap(&ts->query_start_ns, start, 0);
		} else if ((owner = bpf_task_from_pid(c->owner))) {
			otl = task_local_of(owner);
			mysql_park(owner, ts, otl ? &otl->wf : NULL, sk, start);
			bpf_task_release(owner);
		}
	}
	if (mysql_end_parked(&r, sk))
		return;
	mysql_keep(&mysql_replies, sk, &r);
	mysql_handoff(sk);
}

/*
 * The thread's query begins: a command's, or the handshake's, on
 * connection sk. A query it left before its reply (a thread pool's
 * worker does, for a COMMIT) waits for the reply in mysql_parked.
 */
static __always_inline void mysql_begin(struct task_struct *task, struct task_local *tl, struct mysql_conn *c, __u64 sk)
{
	struct thread_state *ts = thread_in(tl);

	if (!ts)
		return;
	/* What is left of the connection's last command: a record whose
	 * reply was never seen, a reply whose record was never parked. */
	if (mysql_kept) {
		if (!mysql_forget(&mysql_parked, sk))
			stat_inc(STAT_QUERY_UNFINISHED);
		mysql_forget(&mysql_replies, sk);
	}
	if (ts->query_start_ns && ts->mysql_conn != sk)
		mysql_park(task, ts, &tl->wf, ts->mysql_conn, 0);
	ts->mysql_conn = sk;
	c->owner = task->pid;
	barrier(); /* the connection, then the start (mysql_end) */
	query_begin(ts, &tl->wf, bpf_ktime_get_ns());
}

#endif /* MYSQL_HANDOFF_BPF_H */
