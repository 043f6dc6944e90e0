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
 * these partition the query's latency. Of the run-queue wait, the part
 * that ended with a storage engine's thread leaving the CPU is kept apart
 * (runq_engine_ns): the engine's threads took the CPUs the query needed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "state.bpf.h"
#include "waterfall.bpf.h"

/* Wait event classes: the code's top byte (PostgreSQL's wait_event.h). */
#define WAIT_CLASS_LWLOCK 0x01
#define WAIT_CLASS_LOCK 0x03
#define WAIT_CLASS_BUFFER 0x04 /* BufferPin until 18; from 19 also the buffer content locks */
#define WAIT_CLASS_IO 0x0A

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

/* A sleep with no event and outside any I/O call: a latch, most often.
 * While reads are done for the query, it is for them: another thread's
 * (InnoDB's read I/O threads, aio.bpf.c), or block requests the query
 * itself started asynchronously (InnoDB's read-ahead with native AIO),
 * whose pages the latch guards until they are in. */
static __always_inline __u8 box_of_latch_sleep(struct task_local *ptl)
{
	struct thread_state *ts = thread_in(ptl);

	if (ts && ts->aio_serving)
		return BOX_AIO_WAIT;
	if (ts && ts->blk_inflight)
		return BOX_IO_WAIT;
	return BOX_OTHER_WAIT;
}

/* What a sleep beginning now is for: the published event first (the lock
 * probes, where they exist, bracket the same waits). Waiting for others'
 * asynchronous I/O is an IO event too (PostgreSQL 18): it is its own box. */
static __always_inline __u8 box_of_sleep(struct task_local *ptl, struct task_struct *prev, struct proc_info *pi)
{
	struct waterfall *wf = &ptl->wf;

	if (wf->wait_event && pi && wf->wait_event == pi->aio_wait_event)
		return BOX_AIO_WAIT;
	switch (wf->wait_event >> 24) {
	case WAIT_CLASS_LOCK:
		return BOX_LOCK;
	case WAIT_CLASS_LWLOCK:
		return BOX_LWLOCK;
	case WAIT_CLASS_IO:
		return BOX_IO_WAIT;
	case WAIT_CLASS_BUFFER: /* 19's content locks (all but BufferCleanup, event 0) were LWLocks until 18 */
		if (wf->wait_version >= 19 && (wf->wait_event & 0xffffff))
			return BOX_LWLOCK;
	}
	if (wf->waiting_for)
		return wf->waiting_for;
	/* in_iowait: the kernel's own mark of an I/O sleep (io_schedule),
	 * which also catches page faults on files outside any syscall. */
	if (wf->in_fs || BPF_CORE_READ_BITFIELD(prev, in_iowait))
		return BOX_IO_WAIT;
	return box_of_latch_sleep(ptl);
}

/*
 * A woken task's wait for a CPU: from the kernel's stamp of when it was
 * queued to now, both in the run queue's clock. The wait is unknown when
 * there is no stamp, or when that clock has not moved since it: a wake
 * that preempts a CPU's task (its idle task too) has the switch that
 * follows skip the clock's update, so the clock still says the wake's
 * time. About a fifth of a busy server's wakes (check: the demo's
 * histogram had them as waits of 0 ns, 21% of its samples): short waits,
 * but of unknown length, so no sample, only a count.
 */
static __always_inline bool woken_wait(struct task_struct *task, __u64 off, __u64 *runq)
{
	__u64 queued = task->sched_info.last_queued, clock = task->se.cfs_rq->rq->clock;

	if (!queued || clock <= queued || clock - queued > off)
		return false;
	*runq = clock - queued;
	return true;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct task_local *ptl = task_local_of(prev);
	struct proc_info *pi = NULL;
	struct waterfall *wf = ptl ? &ptl->wf : NULL;
	__u64 now = 0, off, runq = 0;

	if (wf && wf->serving && wf->oncpu_since) { /* a storage engine's thread: only its CPU counts */
		now = bpf_ktime_get_ns();
		wf->serve_cpu_ns += now - wf->oncpu_since;
		wf->oncpu_since = 0;
	} else if (wf && wf->in_query) {
		now = bpf_ktime_get_ns();
		if (wf->oncpu_since)
			wf->box_ns[BOX_CPU] += now - wf->oncpu_since;
		else if (wf->offcpu_since)
			recover_switch_in(wf, prev, now);
		wf->oncpu_since = 0;
		wf->offcpu_since = now;
		/* Preempted, it stays runnable whatever state it had set on its
		 * way to sleep (the kernel's trace says R+): only a switch that
		 * is not a preemption, with a state set, is a sleep. */
		wf->asleep = prev_state != 0 && !preempt;
		if (wf->asleep) {
			wf->wait_event = published_wait_event(prev, &pi);
			if (!wf->wait_event) /* none published: the wait a probe brackets, if any */
				wf->wait_event = wf->bracket_event;
			wf->wait_version = pi ? pi->version : 0;
			wf->asleep_box = box_of_sleep(ptl, prev, pi);
		}
	}
	wf = waterfall_of(next);
	if (!wf || !(wf->in_query || wf->serving))
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();
	if (wf->serving) {
		wf->oncpu_since = now;
		return 0;
	}
	if (!wf->offcpu_since && wf->oncpu_since) /* it ran until now, yet its switch-out was not seen */
		stat_inc(STAT_WATERFALL_MISSED);
	if (wf->offcpu_since && !crossed_pause(wf->offcpu_since, now)) {
		off = now - wf->offcpu_since;
		if (!wf->asleep) { /* preempted: all of it a wait for a CPU */
			runq = off;
		} else if (woken_wait(next, off, &runq)) {
			charge_sleep(wf, off - runq);
		} else { /* the share is unknown: all of it the sleep's, no sample */
			charge_sleep(wf, off);
			stat_inc(STAT_RUNQ_UNKNOWN);
		}
		if (runq) {
			wf->box_ns[BOX_RUNQ] += runq;
			wf->runq_waits++;
			hist_add(HIST_RUNQ, runq);
			/* Who held the CPU: the task it takes over from (prev, whose
			 * storage was looked up above anyway) ran last before it. A
			 * storage engine's thread there has the whole wait charged to
			 * it, though other tasks may have run earlier in it: on fewer
			 * CPUs than busy threads, what tells an engine that took the
			 * CPUs from one that did not (the verdict's cpusTaken). */
			if (ptl && ptl->kind == PROC_STORAGE)
				wf->runq_engine_ns += runq;
		}
	}
	wf->oncpu_since = now;
	wf->offcpu_since = 0;
	return 0;
}
