/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes are traced. Go seeds `procs` with the instances it found;
 * children forked later (backends, autovacuum workers) inherit membership
 * here, before they can do anything, so no event of theirs is missed.
 */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, ctid = child->pid;
	struct thread_state ts = {};
	struct proc_info *pi;

	pi = bpf_map_lookup_elem(&procs, &ptgid);
	if (!pi)
		return 0;
	if (ctgid != ptgid) /* a new process, not a new thread */
		bpf_map_update_elem(&procs, &ctgid, pi, BPF_ANY);
	ts.tgid = ctgid;
	if (bpf_map_update_elem(&threads, &ctid, &ts, BPF_NOEXIST) && !thread_of(ctid))
		stat_inc(STAT_THREADS_FULL);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid, op;
	struct thread_state *ts = thread_of(tid);
	struct proc_io *pio;

	if (!ts)
		return 0;
	/* Keep the thread's totals: Go reads proc_totals, then deletes the entry. */
	pio = bpf_map_lookup_elem(&proc_totals, &tgid);
	if (!pio) {
		static const struct proc_io zero;

		bpf_map_update_elem(&proc_totals, &tgid, &zero, BPF_NOEXIST);
		pio = bpf_map_lookup_elem(&proc_totals, &tgid);
	}
	if (pio) {
		for (op = 0; op < FS_OPS; op++) {
			__sync_fetch_and_add(&pio->fs[op].count, ts->fs_total[op].count);
			__sync_fetch_and_add(&pio->fs[op].bytes, ts->fs_total[op].bytes);
			__sync_fetch_and_add(&pio->fs[op].ns, ts->fs_total[op].ns);
		}
	} else {
		stat_inc(STAT_PROC_IO_FULL);
	}
	bpf_map_delete_elem(&threads, &tid);
	if (tid == tgid)
		bpf_map_delete_elem(&procs, &tgid);
	return 0;
}
