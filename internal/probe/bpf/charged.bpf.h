/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * I/O a thread does for another thread's query is that query's: a
 * parallel worker's, while its leader runs a query, and an I/O worker's
 * while it performs a read a backend's query asked for (aio.bpf.c). The
 * families that charge I/O (fsio.bpf.c's syscalls, block.bpf.c's
 * requests) ask charged() whose query a thread's I/O serves.
 *
 * A parallel worker is known by its title, "postgres: [cluster: ]parallel
 * worker for PID <leader>", which it sets before it reads anything; it is
 * read on the thread's first I/O.
 */
#ifndef CHARGED_BPF_H
#define CHARGED_BPF_H

#include "state.bpf.h"

/*
 * Reads the title once it is set (it starts "postgres: ") and keeps the
 * leader in ts->leader_tid. The postmaster's title (its command line)
 * never qualifies, so it is read again on each of the postmaster's rare
 * I/O.
 */
static __always_inline void find_leader(struct thread_state *ts)
{
	char t[TITLE_MAX];
	__u32 i, pid = 0;

	if (ts->title_seen)
		return;
	if (bpf_probe_read_user(t, sizeof(t), (void *)BPF_CORE_READ(bpf_get_current_task_btf(), mm, arg_start)))
		return;
	if (t[0] != 'p' || t[8] != ':' || t[9] != ' ') /* "postgres: " not yet written */
		return;
	ts->title_seen = 1;
	for (i = 10; i < TITLE_MAX - 4; i++) {
		if (t[i] == 'P' && t[i + 1] == 'I' && t[i + 2] == 'D' && t[i + 3] == ' ')
			break;
	}
	for (i += 4; i < TITLE_MAX && t[i] >= '0' && t[i] <= '9'; i++)
		pid = pid * 10 + (t[i] - '0');
	ts->leader_tid = pid;
}

#define PF_IO_WORKER 0x00000010

/*
 * An io_uring worker thread (iou-wrk-PID) performs what a thread queued
 * to its ring; the kernel creates it without a fork tracepoint, so it has
 * no state of ours. Its I/O is its submitter's: that thread's tid, else 0.
 */
static __always_inline __u32 io_uring_submitter(struct task_struct *task)
{
	struct io_worker *worker;

	if (!(task->flags & PF_IO_WORKER))
		return 0;
	worker = task->worker_private;
	return BPF_CORE_READ(worker, wq, task, pid);
}

/* A query another process works for: the thread running it, and which of its queries. */
struct query_ref {
	__u32 tid;
	__u32 pad;
	__u64 query_seq; /* 0: none */
};

/* The state of the thread running the query r names, if it still runs. */
static __always_inline struct thread_state *query_running(struct query_ref *r)
{
	struct thread_state *q;

	if (!r->query_seq)
		return NULL;
	q = thread_of(r->tid);
	return q && q->query_start_ns && q->query_seq == r->query_seq ? q : NULL;
}

/* From now on this thread's I/O serves the query r names. */
static __always_inline void serve(struct thread_state *ts, struct query_ref *r)
{
	ts->serves_tid = r->tid;
	ts->serves_seq = r->query_seq;
	ts->serves_since = bpf_ktime_get_ns();
}

/* The thread whose query this thread's I/O serves now, if any. */
static __always_inline __u32 charged_tid(struct thread_state *ts)
{
	return ts->serves_tid ? ts->serves_tid : ts->leader_tid;
}

/* The state of the thread whose running query this thread's I/O serves:
 * the query an I/O worker's read was staged for, or a parallel worker's
 * leader's. Else NULL. */
static __always_inline struct thread_state *charged(struct thread_state *ts)
{
	struct thread_state *q;

	if (ts->serves_tid) {
		struct query_ref r = {.tid = ts->serves_tid, .query_seq = ts->serves_seq};

		return query_running(&r);
	}
	if (!ts->leader_tid)
		return NULL;
	q = thread_of(ts->leader_tid);
	return q && q->query_start_ns ? q : NULL;
}

#endif /* CHARGED_BPF_H */
