/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A query's waterfall, charged: a sleep to its box and wait event, and a
 * switch-in the scheduler hook did not see recovered from the kernel's
 * stamp. Shared by the scheduler hook (sched.bpf.c) and the query's end
 * (query.bpf.h), which may be the first to notice the missed switch-in.
 */
#ifndef WATERFALL_BPF_H
#define WATERFALL_BPF_H

#include "state.bpf.h"
#include "counters.bpf.h"

#define MAX_WAIT_EVENTS 1024

/* Every sleep of a query by wait event: one histogram per event seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_WAIT_EVENTS);
	__type(key, struct wait_key);
	__type(value, struct hist);
} wait_hists SEC(".maps");

/* A box a sleep may be charged to, bounded where the verifier sees it. */
static __always_inline __u32 sleep_box(__u8 box)
{
	return box < BOXES ? box : BOX_OTHER_WAIT;
}

static __always_inline void wait_hist_add(__u32 version, __u32 event, __u64 ns)
{
	struct wait_key key = {.version = version, .event = event};
	struct hist *h = hist_of(&wait_hists, &key, STAT_WAIT_HISTS_FULL);

	if (h)
		hist_add_shared(h, ns);
}

/* A sleep of ns to a query's boxes and waits: a waterfall's, or a copy. */
static __always_inline void add_sleep(__u64 *box_ns, struct wait_time *waits, __u8 box, __u32 event, __u64 ns)
{
	__u32 i;

	box_ns[sleep_box(box)] += ns;
	if (!event)
		return;
	for (i = 0; i < QUERY_WAITS - 1; i++) {
		if (waits[i].event == event || !waits[i].event) {
			waits[i].event = event;
			waits[i].ns += ns;
			return;
		}
	}
	waits[QUERY_WAITS - 1].event = WAIT_EVENTS_OTHER;
	waits[QUERY_WAITS - 1].ns += ns;
}

/* ...and to the machine's histograms of lock waits and wait events. */
static __always_inline void hist_sleep(__u8 box, __u32 version, __u32 event, __u64 ns)
{
	if (box == BOX_LOCK || box == BOX_LWLOCK)
		hist_add(HIST_LOCK, ns);
	if (event)
		wait_hist_add(version, event, ns);
}

/* A sleep of ns ends: to its box and, when named, to its wait event. */
static __always_inline void charge_sleep(struct waterfall *wf, __u64 ns)
{
	add_sleep(wf->box_ns, wf->waits, wf->asleep_box, wf->wait_event, ns);
	hist_sleep(wf->asleep_box, wf->wait_version, wf->wait_event, ns);
}

/*
 * It runs, yet its switch-in was not seen (rare: a few times a minute
 * under heavy load with uprobes firing). The kernel stamped its arrival
 * (sched_info.last_arrival, in the run queue's clock): the time since it
 * went off CPU splits into its time on CPU since then and, before, the
 * wait its switch-out said it began. At a switch-out the run queue's clock
 * was just updated; at the query's end it may be up to a tick old, which
 * moves at most that much of the CPU time into the wait before it.
 */
static __always_inline void recover_switch_in(struct waterfall *wf, struct task_struct *task, __u64 now)
{
	__u64 off = now - wf->offcpu_since;
	__u64 on = task->se.cfs_rq->rq->clock - task->sched_info.last_arrival;

	if (on > off)
		on = off;
	wf->box_ns[BOX_CPU] += on;
	if (wf->asleep)
		charge_sleep(wf, off - on);
	else
		wf->box_ns[BOX_RUNQ] += off - on;
	stat_inc(STAT_WATERFALL_RECOVERED);
}

#endif /* WATERFALL_BPF_H */
