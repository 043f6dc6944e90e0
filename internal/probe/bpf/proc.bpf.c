/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes are traced. Go seeds `procs` with the instances it found;
 * children forked later (backends, autovacuum workers) inherit membership
 * here, before they can do anything, so no event of theirs is missed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "state.bpf.h"

/* File system totals of exited threads by unit (a process, or a MySQL
 * server's thread), read by Go. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc_io);
} proc_totals SEC(".maps");

/* Process runs (proc_run) at exit: rare, small. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} proc_runs SEC(".maps");

/* Processes added to procs here, ever: Go walks procs for new ones only
 * when this moved (Tracer.NewProcs). */
volatile __u64 procs_forked;

/*
 * Thread tid of a process pi names gets a free slot of thread_states:
 * slot + 1, or 0 when none is free (the thread is not traced: counted).
 * If Go gave it one meanwhile (it attaches while the thread is born),
 * that one.
 */
static __always_inline __u32 thread_add(__u32 tid, __u32 tgid, struct proc_info *pi)
{
	static const struct thread_state fresh; /* too big for the stack */
	struct thread_state *ts;
	__u32 slot, *held;

	if (bpf_map_pop_elem(&free_slots, &slot) || bpf_map_update_elem(&thread_states, &slot, &fresh, BPF_ANY) ||
	    !(ts = bpf_map_lookup_elem(&thread_states, &slot))) {
		stat_inc(STAT_THREADS_FULL);
		return 0;
	}
	ts->tid = tid;
	ts->tgid = tgid;
	ts->unit = pi->kind == PROC_MYSQL ? tid : tgid;
	if (pi->kind == PROC_STORAGE) /* a storage engine's thread: no title to look for */
		ts->engine = ts->title_seen = 1;
	if (bpf_map_update_elem(&threads, &tid, &slot, BPF_NOEXIST)) {
		ts->tid = 0;
		bpf_map_push_elem(&free_slots, &slot, 0);
		held = bpf_map_lookup_elem(&threads, &tid);
		return held ? *held + 1 : 0;
	}
	return slot + 1;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct task_local *tl;
	struct proc_info *pi;

	pi = bpf_map_lookup_elem(&procs, &ptgid);
	if (!pi)
		return 0;
	if (ctgid != ptgid) {
		bpf_map_update_elem(&procs, &ctgid, pi, BPF_ANY);
		__sync_fetch_and_add(&procs_forked, 1);
	}
	tl = bpf_task_storage_get(&tasks, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!tl) { /* nothing to hold its slot: not traced */
		stat_inc(STAT_WATERFALL_FULL);
		return 0;
	}
	/* A MySQL server's threads may each serve connections: they tell by
	 * their bytes (mysql.bpf.c). A PostgreSQL server's new process (not a
	 * new thread) is a backend if it reads a startup packet first. */
	tl->kind = pi->kind;
	tl->instance = pi->instance;
	if (pi->kind == PROC_POSTGRES && ctgid != ptgid)
		tl->wire.state = WIRE_NEW;
	tl->slot = thread_add(child->pid, ctgid, pi);
	return 0;
}

static __always_inline void send_proc_run(struct task_struct *task, struct thread_state *ts)
{
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &ts->tgid);
	struct proc_run *e = bpf_ringbuf_reserve(&proc_runs, sizeof(*e), 0);

	if (!e) {
		stat_inc(STAT_PROC_RUNS_FULL);
		return;
	}
	e->start_ns = task->start_time;
	e->end_ns = bpf_ktime_get_ns();
	e->cpu_ns = task->se.sum_exec_runtime;
	e->utime_ns = task->utime;
	e->stime_ns = task->stime;
	e->runq_ns = task->sched_info.run_delay;
	e->pid = ts->unit;
	e->instance = pi ? pi->instance : 0;
	__builtin_memcpy(e->fs, ts->fs_total, sizeof(e->fs));
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid, unit, op, *slot = bpf_map_lookup_elem(&threads, &tid);
	struct thread_state *ts = slot ? bpf_map_lookup_elem(&thread_states, slot) : NULL;
	struct task_local *tl;
	struct proc_io *pio;

	if (!ts || ts->tid != tid)
		return 0;
	/* Keep the thread's totals: Go reads proc_totals, then deletes the entry. */
	unit = ts->unit;
	pio = bpf_map_lookup_elem(&proc_totals, &unit);
	if (!pio) {
		static const struct proc_io zero;

		bpf_map_update_elem(&proc_totals, &unit, &zero, BPF_NOEXIST);
		pio = bpf_map_lookup_elem(&proc_totals, &unit);
	}
	if (pio) {
		for (op = 0; op < FS_ACCTS; op++) {
			__sync_fetch_and_add(&pio->fs[op].count, ts->fs_total[op].count);
			__sync_fetch_and_add(&pio->fs[op].bytes, ts->fs_total[op].bytes);
			__sync_fetch_and_add(&pio->fs[op].ns, ts->fs_total[op].ns);
		}
	} else {
		stat_inc(STAT_PROC_TOTALS_FULL);
	}
	if (tid == unit) /* the process (or a MySQL server's thread) ends: one record of its run */
		send_proc_run(task, ts);
	if ((tl = task_local_of(task)))
		tl->slot = 0;
	ts->tid = 0;
	bpf_map_push_elem(&free_slots, slot, 0);
	bpf_map_delete_elem(&threads, &tid);
	if (tid == tgid)
		bpf_map_delete_elem(&procs, &tgid);
	return 0;
}
