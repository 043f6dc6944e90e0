/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Parallel workers: while its leader runs a query, a worker's file system
 * and block I/O are the query's. A worker is known by its title,
 * "postgres: [cluster: ]parallel worker for PID <leader>", which it sets
 * before it reads anything; the families that charge I/O read it on the
 * thread's first I/O (fsio.bpf.c's syscalls, block.bpf.c's requests).
 */
#ifndef PARALLEL_BPF_H
#define PARALLEL_BPF_H

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

/* For a parallel worker whose leader is running a query, the leader's
 * state: the worker's I/O is charged to that query. Else NULL. */
static __always_inline struct thread_state *charged(struct thread_state *ts)
{
	struct thread_state *leader;

	if (!ts->leader_tid)
		return NULL;
	leader = thread_of(ts->leader_tid);
	return leader && leader->query_start_ns ? leader : NULL;
}

#endif /* PARALLEL_BPF_H */
