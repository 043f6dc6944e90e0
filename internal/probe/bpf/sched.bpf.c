/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How much of a query ran on a CPU? Time between being switched in and
 * switched out, summed while the thread is in a query. One tracepoint per
 * context switch; two hash lookups that miss for every untraced thread.
 */

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 prev_tid = prev->pid, next_tid = next->pid;
	struct thread_state *ts;
	__u64 now = bpf_ktime_get_ns();

	ts = thread_of(prev_tid);
	if (ts && ts->query_start_ns && ts->oncpu_since_ns) {
		ts->acct.cpu_ns += now - ts->oncpu_since_ns;
		ts->oncpu_since_ns = 0;
	}
	ts = thread_of(next_tid);
	if (ts && ts->query_start_ns)
		ts->oncpu_since_ns = now;
	return 0;
}
