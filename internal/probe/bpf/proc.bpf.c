/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes are traced. Go seeds `procs` with the instances it found;
 * children forked later (backends, autovacuum workers) inherit membership
 * here, before they can do anything, so no event of theirs is missed.
 */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(proc_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	struct proc_info *pi;

	if (ptgid == ctgid) /* a new thread of a known process */
		return 0;
	pi = bpf_map_lookup_elem(&procs, &ptgid);
	if (pi)
		bpf_map_update_elem(&procs, &ctgid, pi, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(proc_exit, struct task_struct *task)
{
	__u32 tid = task->pid, tgid = task->tgid;

	bpf_map_delete_elem(&threads, &tid);
	if (tid == tgid)
		bpf_map_delete_elem(&procs, &tgid);
	/* proc_totals and blk_totals keep the totals: Go reads them, then deletes. */
	return 0;
}
