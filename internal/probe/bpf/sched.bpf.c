/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How much of a query ran on a CPU? Time between being switched in and
 * switched out, summed while the thread is in a query. One tracepoint per
 * context switch; for tasks that never ran a query, two pointer tests.
 */

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct cpu_state *cs;
	__u64 now;

	cs = bpf_task_storage_get(&cpu_states, prev, 0, 0);
	if (cs && cs->in_query && cs->oncpu_since_ns) {
		now = bpf_ktime_get_ns();
		cs->cpu_ns += now - cs->oncpu_since_ns;
		cs->oncpu_since_ns = 0;
	}
	cs = bpf_task_storage_get(&cpu_states, next, 0, 0);
	if (cs && cs->in_query)
		cs->oncpu_since_ns = bpf_ktime_get_ns();
	return 0;
}
