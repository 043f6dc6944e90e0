/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where does a query's time go off its CPU? On switch-out a running query
 * either was preempted (it waits for a CPU from here) or went to sleep
 * (the sleep is classified by what the thread was doing). On switch-in
 * the time off CPU splits into the sleep and the run-queue wait after it:
 * the kernel stamps when it queued the task (sched_info.last_queued, in
 * the run queue's clock), so no wakeup hook is needed. With on-CPU time
 * these partition the query's latency.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "state.bpf.h"

/* A box a sleep may be charged to, bounded where the verifier sees it. */
static __always_inline __u32 sleep_box(__u8 box)
{
	return box < BOXES ? box : BOX_OTHER_WAIT;
}

/*
 * It runs, yet its switch-in was not seen (rare: a few times a minute
 * under heavy load with uprobes firing). The kernel stamped its arrival
 * (sched_info.last_arrival, in the run queue's clock, as fresh as now):
 * the time since it went off CPU splits into its time on CPU since then
 * and, before, the wait its switch-out said it began.
 */
static __always_inline void recover_switch_in(struct waterfall *wf, struct task_struct *prev, __u64 now)
{
	__u64 off = now - wf->offcpu_since;
	__u64 on = prev->se.cfs_rq->rq->clock - prev->sched_info.last_arrival;

	if (on > off)
		on = off;
	wf->box_ns[BOX_CPU] += on;
	wf->box_ns[wf->asleep ? sleep_box(wf->asleep_box) : BOX_RUNQ] += off - on;
	stat_inc(STAT_WATERFALL_RECOVERED);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct waterfall *wf;
	__u64 now = 0, off, runq;

	wf = waterfall_of(prev);
	if (wf && wf->in_query) {
		now = bpf_ktime_get_ns();
		if (wf->oncpu_since)
			wf->box_ns[BOX_CPU] += now - wf->oncpu_since;
		else if (wf->offcpu_since)
			recover_switch_in(wf, prev, now);
		wf->oncpu_since = 0;
		wf->offcpu_since = now;
		if (prev_state == 0) { /* TASK_RUNNING: preempted, still runnable */
			wf->asleep = 0;
		} else {
			/*
			 * in_iowait: the kernel's own mark of an I/O sleep
			 * (io_schedule), which also catches page faults on
			 * files outside any syscall.
			 */
			wf->asleep = 1;
			if (wf->waiting_for)
				wf->asleep_box = wf->waiting_for;
			else if (wf->in_fs || BPF_CORE_READ_BITFIELD(prev, in_iowait))
				wf->asleep_box = BOX_IO_WAIT;
			else
				wf->asleep_box = BOX_OTHER_WAIT;
		}
	}
	wf = waterfall_of(next);
	if (!wf || !wf->in_query)
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();
	if (!wf->offcpu_since && wf->oncpu_since) /* it ran until now, yet its switch-out was not seen */
		stat_inc(STAT_WATERFALL_MISSED);
	if (wf->offcpu_since) {
		off = now - wf->offcpu_since;
		runq = off;
		if (wf->asleep) {
			/* Queued when woken: the run-queue wait is the rest. */
			runq = next->se.cfs_rq->rq->clock - next->sched_info.last_queued;
			if (!next->sched_info.last_queued || runq > off)
				runq = 0;
			wf->box_ns[sleep_box(wf->asleep_box)] += off - runq;
			if (wf->asleep_box == BOX_LOCK || wf->asleep_box == BOX_LWLOCK)
				hist_add(HIST_LOCK, off - runq);
		}
		wf->box_ns[BOX_RUNQ] += runq;
		hist_add(HIST_RUNQ, runq);
	}
	wf->oncpu_since = now;
	wf->offcpu_since = 0;
	return 0;
}
