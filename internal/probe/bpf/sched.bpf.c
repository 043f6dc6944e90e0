/*
 * Where does a query's time go off its CPU? On switch-out a running query
 * either was preempted (runnable: run-queue wait starts) or went to sleep
 * (the sleep is classified by what the thread was doing); a wakeup ends
 * the sleep and starts the run-queue wait; switch-in ends it. With on-CPU
 * time these partition the query's latency.
 */

static __always_inline void end_sleep(struct waterfall *wf, __u64 now)
{
	if (!wf->asleep_since)
		return;
	wf->wait_ns[wf->asleep_kind & 3] += now - wf->asleep_since;
	if (wf->asleep_kind == WAIT_LOCK || wf->asleep_kind == WAIT_LWLOCK)
		hist_add(HIST_LOCK, now - wf->asleep_since);
	wf->asleep_since = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct waterfall *wf;
	__u64 now = 0;

	wf = waterfall_of(prev);
	if (wf && wf->in_query) {
		now = bpf_ktime_get_ns();
		if (wf->oncpu_since)
			wf->cpu_ns += now - wf->oncpu_since;
		wf->oncpu_since = 0;
		if (prev_state == 0) { /* TASK_RUNNING: preempted, still runnable */
			wf->runnable_since = now;
		} else {
			/*
			 * in_iowait: the kernel's own mark of an I/O sleep
			 * (io_schedule), which also catches page faults on
			 * files outside any syscall.
			 */
			wf->asleep_since = now;
			if (wf->waiting_for)
				wf->asleep_kind = wf->waiting_for;
			else if (wf->in_fs || BPF_CORE_READ_BITFIELD(prev, in_iowait))
				wf->asleep_kind = WAIT_IO;
			else
				wf->asleep_kind = WAIT_OTHER;
		}
	}
	wf = waterfall_of(next);
	if (wf && wf->in_query) {
		if (!now)
			now = bpf_ktime_get_ns();
		end_sleep(wf, now); /* woken without a wakeup event seen */
		if (wf->runnable_since) {
			wf->runq_ns += now - wf->runnable_since;
			hist_add(HIST_RUNQ, now - wf->runnable_since);
			wf->runnable_since = 0;
		}
		wf->oncpu_since = now;
	}
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	struct waterfall *wf = waterfall_of(p);
	__u64 now;

	if (!wf || !wf->in_query || !wf->asleep_since)
		return 0;
	now = bpf_ktime_get_ns();
	end_sleep(wf, now);
	wf->runnable_since = now;
	return 0;
}
