/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A query's begin and end, in the backend running it; what marks the two
 * is the caller's choice: the client protocol (pgwire.bpf.c, the default)
 * or PostgreSQL's USDT probes (query.bpf.c, --usdt). The record goes out
 * at the end with everything the other families added to the thread's
 * query_acct meanwhile.
 */
#ifndef QUERY_BPF_H
#define QUERY_BPF_H

#include "state.bpf.h"
#include "counters.bpf.h"
#include "waterfall.bpf.h"
#include "statements.bpf.h"

/*
 * Which finished queries become records; the others only count in
 * HIST_QUERY. Set by Go before load from the command's thresholds, so a
 * busy database does not pay for records nobody will see.
 */
const volatile __u64 emit_min_query_ns = ~0ULL; /* a query at least this long */
const volatile __u64 emit_min_fs_ns = ~0ULL;    /* file system time at least this */
const volatile __u8 emit_if_io = 0;             /* any query that did I/O */

/* Query records. Go sizes it before load; producers never wake the reader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* One record per CPU to assemble the event before a variable-size output. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct query_event);
} query_scratch SEC(".maps");

static __always_inline int wanted(struct query_acct *a, __u64 ns)
{
	__u64 fs = a->fs[FS_READ].ns + a->fs[FS_WRITE].ns + a->fs[FS_SYNC].ns;

	if (ns >= emit_min_query_ns || fs >= emit_min_fs_ns)
		return 1;
	return emit_if_io && (a->fs[FS_READ].count || a->fs[FS_WRITE].count ||
			      a->fs[FS_SYNC].count || a->blk[BLK_READ].count ||
			      a->blk[BLK_WRITE].count || a->blk[BLK_OTHER].count);
}

/* A query begins, in the thread that runs it: so that thread is on CPU. */
static __always_inline void query_begin(struct thread_state *ts, struct waterfall *wf, __u64 now)
{
	if (ts->query_start_ns) /* its end was not seen: during a pause, or never sent */
		stat_inc(crossed_pause(ts->query_start_ns, now) ? STAT_QUERY_CUT : STAT_QUERY_UNFINISHED);
	__builtin_memset(&ts->acct, 0, sizeof(ts->acct));
	ts->query_seq++;
	if (wf) {
		__builtin_memset(wf, 0, sizeof(*wf));
		wf->in_query = (__u32)now | 1;
		wf->oncpu_since = now;
	} else {
		stat_inc(STAT_WATERFALL_FULL);
	}
	/* Requests still in flight belong to the query before: this one's
	 * busy time counts only its own. */
	ts->blk_inflight = 0;
	ts->blk_busy_since = 0;
	ts->aio_serving = 0;
	ts->query_start_ns = now;
}

/*
 * The application that sent the query: PostgreSQL's application_name, as
 * the backend (the current task: every query ends in its own thread) holds
 * it now. Read from its memory rather than from the protocol: the variable
 * is what the server itself reports (pg_stat_activity), whatever set it:
 * the startup packet, SET or SET LOCAL and their undoing, set_config(),
 * RESET, a pooler's SET for the client it serves now; over TLS or GSS, for
 * connections older than the trace, with --usdt, and at the cost of two
 * small reads per record sent, not a walk of every reply. Empty when not
 * known.
 */
static __always_inline void query_application(struct query_event *e, struct proc_info *pi)
{
	__u64 name = 0;

	e->application[0] = 0;
	if (!pi || !pi->wait_event_ptr || !pi->application_off ||
	    bpf_probe_read_user(&name, sizeof(name), (void *)(pi->wait_event_ptr + pi->application_off)) || !name)
		return;
	if (bpf_probe_read_user_str(e->application, sizeof(e->application), (void *)name) < 0)
		e->application[0] = 0;
}

/*
 * The statement's query id, as the backend (the current task) published it
 * for pg_stat_activity: PostgreSQL computes it after parse analysis (with
 * compute_query_id on, or auto and pg_stat_statements loaded) into its
 * status entry, where it stays until the next statement begins. Two small
 * reads per record sent, none per query counted. 0 when not known.
 */
static __always_inline __u64 query_queryid(struct proc_info *pi)
{
	__u64 entry = 0, id = 0;

	if (!pi || !pi->wait_event_ptr || !pi->status_off || !pi->query_id_off ||
	    bpf_probe_read_user(&entry, sizeof(entry), (void *)(pi->wait_event_ptr + pi->status_off)) || !entry ||
	    bpf_probe_read_user(&id, sizeof(id), (void *)(entry + pi->query_id_off)))
		return 0;
	return id;
}

/*
 * The record of the thread's query from start to now, but for its
 * accounts (acct, waits), which the caller fills, and its text.
 */
static __always_inline void query_fill(struct query_event *e, struct thread_state *ts, __u64 start, __u64 now,
				       __u8 flags)
{
	struct proc_info *pi;

	e->start_ns = start;
	e->end_ns = now;
	e->pid = (__u32)bpf_get_current_pid_tgid();
	e->tgid = ts->tgid;
	e->emit_flags = flags;
	e->conn = 0; /* the MySQL family sets these */
	e->reply_id = 0;
	e->statements = 0; /* query_end and PostgreSQL's pipelines set these */
	e->first_statement = 0;
	e->failed = 0;
	e->text_first = 0;
	e->text_skip = 0; /* pgwire_submit sets these */
	e->text_at = 0;
	e->portals_open = e->portals_ended = 0;
	e->earlier_ns = 0;
	__builtin_memset(&e->stmt, 0, sizeof(e->stmt)); /* query_end sets it */
	__builtin_memset(&e->pooled, 0, sizeof(e->pooled)); /* pgwire_submit sets it behind a pooler */
	pi = bpf_map_lookup_elem(&procs, &e->tgid);
	e->instance = pi ? pi->instance : 0;
	/* PostgreSQL writes its title over argv, so it starts at arg_start. */
	if (bpf_probe_read_user(e->title, sizeof(e->title),
				(void *)BPF_CORE_READ(bpf_get_current_task_btf(), mm, arg_start)))
		e->title[0] = 0;
	query_application(e, pi);
	e->queryid = query_queryid(pi);
}

/*
 * How a query ends: how many statements it ended (a PostgreSQL pipeline's
 * record may hold several), whether its time is a statement's (all or a
 * part: a portal suspended at its row limit goes on in a later round
 * trip, whose statement then took earlier_ns more), whether it teaches Go.
 */
struct query_ending {
	__u32 statements;
	__u8 timed;
	__u8 teaches;
	__u8 single; /* its round trip (MySQL: its command) ran it alone: stmt is its statement's */
	__u64 earlier_ns;
	/* The statement's identity, as its protocol tells (kind 0: none); its
	 * CPU, and its instance if the caller did not know it, are set where
	 * it is counted (query_counted). */
	struct stmt_key stmt;
};

/*
 * With count_statements, a statement that ended alone is counted under the
 * identity its protocol gave it (how->stmt: statements.bpf.h), and so are
 * the statements of a round trip that has an identity of its own; others
 * are sent for Go to count. Returns the record's flags.
 */
static __always_inline int query_statement(struct query_acct *a, struct query_ending *how, __u64 ns)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_info *pi;
	int flags = 0;

	if (how->stmt.kind && (how->statements == 1 || !how->single)) { /* !single: a walked round trip's group */
		if (!how->stmt.instance) { /* the caller had none at hand */
			pi = bpf_map_lookup_elem(&procs, &tgid);
			how->stmt.instance = pi ? pi->instance : 0;
		}
		flags = stmt_count(&how->stmt, a, ns, how->statements);
	} else {
		flags = EMIT_WANTED;
	}
	if (emit_sample && bpf_get_prandom_u32() < emit_sample)
		flags |= EMIT_SAMPLED;
	return flags;
}

/*
 * A query from start to now ends as how says: a query begun before a
 * pause of tracing is left out (counted); its statements count in
 * HIST_QUERY (several ended together: each at their mean). Returns why
 * its record would be sent (enum emit_flag), 0 for none. A global
 * function: the verifier checks it once, not after every path that ends
 * a query (a MySQL reply's walk has many).
 */
__noinline int query_counted(struct query_acct *a, __u64 start, __u64 now, struct query_ending *how)
{
	int flags;

	if (!a || !how)
		return 0;
	flags = how->teaches ? EMIT_STATEMENT : 0;

	if (how->timed && crossed_pause(start, now)) { /* not measured whole: left out, counted */
		stat_inc(STAT_QUERY_CUT);
		how->timed = 0;
		how->statements = 0;
	}
	if (!how->timed)
		return flags;
	if (how->statements > 1) /* the kernel saw no boundary between them */
		stat_add(STAT_WIRE_GROUPED, how->statements);
	if (how->statements)
		hist_add_n(HIST_QUERY, how->earlier_ns + now - start, how->statements);
	if (wanted(a, now - start))
		flags |= EMIT_WANTED;
	if (count_statements && how->statements)
		flags |= query_statement(a, how, how->earlier_ns + now - start);
	return flags;
}

/*
 * The query ends, in the thread that ran it: its waterfall closes and it
 * is counted (query_counted). If a record is to be sent (it met the
 * thresholds, or it teaches Go a statement), the per-CPU record is filled
 * but for its text and returned; else NULL.
 */
static __always_inline struct query_event *query_end(struct thread_state *ts, struct waterfall *wf, __u64 now,
						     struct query_ending how)
{
	__u32 zero = 0, i;
	struct query_event *e;
	/* Taken, not read: a MySQL thread pool's worker sending the reply
	 * may end it at the same moment in this thread's stead (mysql_take). */
	__u64 start = __sync_lock_test_and_set(&ts->query_start_ns, 0);
	__u8 flags;

	if (!start)
		return NULL;
	if (wf) {
		wf->in_query = 0;
		if (wf->oncpu_since)
			wf->box_ns[BOX_CPU] += now - wf->oncpu_since;
		else if (wf->offcpu_since) /* it runs, yet its last switch-in was not seen */
			recover_switch_in(wf, bpf_get_current_task_btf(), now);
		for (i = 0; i < BOXES; i++)
			ts->acct.box_ns[i] = wf->box_ns[i];
		ts->acct.runq_engine_ns = wf->runq_engine_ns;
		ts->acct.runq_waits = wf->runq_waits;
	}
	if (ts->blk_inflight && ts->blk_busy_since) /* requests outliving the query */
		ts->acct.blk_busy_ns += now - ts->blk_busy_since;
	flags = query_counted(&ts->acct, start, now, &how);
	if (how.timed) { /* measured whole (query_counted): the thread's totals */
		ts->queries_ns += now - start;
		for (i = 0; i < BOXES; i++)
			ts->queries_box_ns[i] += ts->acct.box_ns[i];
	}
	if (!(flags & ~EMIT_COUNTED)) /* counted in the kernel, and nothing more to tell */
		return NULL;
	e = bpf_map_lookup_elem(&query_scratch, &zero);
	if (!e)
		return NULL;
	e->acct = ts->acct;
	if (wf)
		__builtin_memcpy(e->waits, wf->waits, sizeof(e->waits));
	else
		__builtin_memset(e->waits, 0, sizeof(e->waits));
	query_fill(e, ts, start, now, flags);
	e->statements = how.statements;
	e->earlier_ns = how.earlier_ns;
	e->stmt = how.stmt;
	return e;
}

/*
 * Send the record with its first n bytes of text. No wakeup: Go drains on
 * a timer, so a busy database does not pay a reader wakeup per query.
 */
static __always_inline void query_submit(struct query_event *e, __u32 n, int truncated)
{
	if (n > QUERY_TEXT_MAX)
		n = QUERY_TEXT_MAX;
	e->text_len = n;
	e->text_truncated = truncated;
	if (bpf_ringbuf_output(&events, e, offsetof(struct query_event, text) + n, BPF_RB_NO_WAKEUP))
		stat_inc(STAT_RINGBUF_FULL);
}

#endif /* QUERY_BPF_H */
