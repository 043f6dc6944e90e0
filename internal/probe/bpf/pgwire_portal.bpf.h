/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * PostgreSQL's portals suspended at their row limit (PortalSuspended):
 * their statements count when PostgreSQL ends them, completed or not
 * (struct wire's open, with their parts' time in portal_ns); those ended
 * by a later round trip (a Close, a new unnamed portal, the transaction's
 * commit) make a record of their own. When each ends: pgwire_end.
 */
#ifndef PGWIRE_PORTAL_BPF_H
#define PGWIRE_PORTAL_BPF_H

#include "pgwire_capture.bpf.h"

/*
 * n of the suspended portals end (a resumed one completed, or they were
 * dropped): the time of their parts, an even share of it if others stay
 * open.
 */
static __always_inline __u64 portal_take(struct wire *w, __u32 n)
{
	__u64 ns;

	if (!n || !w->open)
		return 0;
	if (n >= w->open) {
		ns = w->portal_ns;
		w->open = w->open_unnamed = 0;
		w->portal_ns = 0;
		return ns;
	}
	ns = w->portal_ns / w->open * n;
	w->portal_ns -= ns;
	w->open -= n;
	return ns;
}

/*
 * n suspended portals of earlier round trips ended in this one (a Close,
 * a new unnamed portal, the transaction's commit): PostgreSQL ended their
 * statements (ExecutorEnd), so they count now, with the time of their
 * parts, in a record of their own that Go names from the records that
 * suspended them (it carries this round trip's messages: the Closes name
 * the portals).
 */
static __noinline void pgwire_portals_ended(struct task_struct *task, struct wire *w, __u32 n, __u64 now)
{
	struct thread_state *ts = thread_current();
	struct query_event *e;
	__u32 zero = 0;
	__u64 ns;

	if (!w || !n)
		return;
	ns = portal_take(w, n);
	if (n > 1) /* the kernel cannot tell their times apart */
		stat_add(STAT_WIRE_GROUPED, n);
	hist_add_n(HIST_QUERY, ns, n);
	if (!ts || !(e = bpf_map_lookup_elem(&query_scratch, &zero)))
		return;
	__builtin_memset(&e->acct, 0, sizeof(e->acct));
	if (!wanted(&e->acct, ns) && !count_statements) /* statements no identity counts: Go counts them */
		return;
	__builtin_memset(e->waits, 0, sizeof(e->waits));
	query_fill(e, ts, now, now, EMIT_WANTED);
	e->statements = n;
	e->portals_ended = n;
	e->earlier_ns = ns;
	pgwire_submit(e, w, bpf_task_storage_get(&captures, task, 0, 0));
}

#endif /* PGWIRE_PORTAL_BPF_H */
