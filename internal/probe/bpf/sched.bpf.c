/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where does a query's time go off its CPU? On switch-out a running query
 * either was preempted (it waits for a CPU from here) or went to sleep.
 * A sleep is named by the wait event the database published for it (a
 * PostgreSQL backend keeps its current one where my_wait_event_info
 * points, as pg_stat_activity shows it) and charged to the box of the
 * event's class; without one, by what the thread was doing. On switch-in
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

/* Wait event classes: the code's top byte (PostgreSQL's wait_event.h). */
#define WAIT_CLASS_LWLOCK 0x01
#define WAIT_CLASS_LOCK 0x03
#define WAIT_CLASS_IO 0x0A

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

/* The wait event the task published, read in its own context (the
 * switch-out runs in the task going to sleep); 0 if none or unreadable. */
static __always_inline __u32 published_wait_event(struct task_struct *task, struct proc_info **pi)
{
	__u32 tgid = task->tgid, event = 0;
	__u64 ptr = 0;

	*pi = bpf_map_lookup_elem(&procs, &tgid);
	if (!*pi || !(*pi)->wait_event_ptr)
		return 0;
	if (bpf_probe_read_user(&ptr, sizeof(ptr), (void *)(*pi)->wait_event_ptr) || !ptr ||
	    bpf_probe_read_user(&event, sizeof(event), (void *)ptr))
		return 0;
	return event;
}

/* What a sleep beginning now is for: the published event first (the lock
 * probes, where they exist, bracket the same waits). Waiting for others'
 * asynchronous I/O is an IO event too (PostgreSQL 18): it is its own box. */
static __always_inline __u8 box_of_sleep(struct waterfall *wf, struct task_struct *prev, struct proc_info *pi)
{
	if (wf->wait_event && pi && wf->wait_event == pi->aio_wait_event)
		return BOX_AIO_WAIT;
	switch (wf->wait_event >> 24) {
	case WAIT_CLASS_LOCK:
		return BOX_LOCK;
	case WAIT_CLASS_LWLOCK:
		return BOX_LWLOCK;
	case WAIT_CLASS_IO:
		return BOX_IO_WAIT;
	}
	if (wf->waiting_for)
		return wf->waiting_for;
	/* in_iowait: the kernel's own mark of an I/O sleep (io_schedule),
	 * which also catches page faults on files outside any syscall. */
	if (wf->in_fs || BPF_CORE_READ_BITFIELD(prev, in_iowait))
		return BOX_IO_WAIT;
	return BOX_OTHER_WAIT;
}

static __always_inline void wait_hist_add(struct waterfall *wf, __u64 ns)
{
	struct wait_key key = {.version = wf->wait_version, .event = wf->wait_event};
	struct hist *h = bpf_map_lookup_elem(&wait_hists, &key);
	__u32 slot = log2_slot(ns);

	if (!h) {
		static const struct hist zero;

		bpf_map_update_elem(&wait_hists, &key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&wait_hists, &key);
		if (!h) {
			stat_inc(STAT_WAIT_HISTS_FULL);
			return;
		}
	}
	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum, ns);
}

/* A sleep of ns ends: to its box and, when named, to its wait event. */
static __always_inline void charge_sleep(struct waterfall *wf, __u64 ns)
{
	__u32 event = wf->wait_event, i;

	wf->box_ns[sleep_box(wf->asleep_box)] += ns;
	if (wf->asleep_box == BOX_LOCK || wf->asleep_box == BOX_LWLOCK)
		hist_add(HIST_LOCK, ns);
	if (!event)
		return;
	wait_hist_add(wf, ns);
	for (i = 0; i < QUERY_WAITS - 1; i++) {
		if (wf->waits[i].event == event || !wf->waits[i].event) {
			wf->waits[i].event = event;
			wf->waits[i].ns += ns;
			return;
		}
	}
	wf->waits[QUERY_WAITS - 1].event = WAIT_EVENTS_OTHER;
	wf->waits[QUERY_WAITS - 1].ns += ns;
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
	if (wf->asleep)
		charge_sleep(wf, off - on);
	else
		wf->box_ns[BOX_RUNQ] += off - on;
	stat_inc(STAT_WATERFALL_RECOVERED);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct proc_info *pi = NULL;
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
		wf->asleep = prev_state != 0; /* TASK_RUNNING: preempted, still runnable */
		if (wf->asleep) {
			wf->wait_event = published_wait_event(prev, &pi);
			wf->wait_version = pi ? pi->version : 0;
			wf->asleep_box = box_of_sleep(wf, prev, pi);
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
			charge_sleep(wf, off - runq);
		}
		wf->box_ns[BOX_RUNQ] += runq;
		hist_add(HIST_RUNQ, runq);
	}
	wf->oncpu_since = now;
	wf->offcpu_since = 0;
	return 0;
}
