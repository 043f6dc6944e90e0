/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Is a query asleep on a lock? PostgreSQL's lock__wait__start/done and
 * lwlock__wait__start/done USDT probes bracket the waits; they fire only
 * when a backend actually has to wait, so they cost nothing otherwise. The
 * scheduler hook charges the sleep inside the bracket to the lock.
 */

static __always_inline int set_waiting(__u8 kind)
{
	struct waterfall *wf = waterfall_current();

	if (wf && wf->in_query)
		wf->waiting_for = kind;
	return 0;
}

SEC("uprobe")
int lock_wait_start(struct pt_regs *ctx) { return set_waiting(WAIT_LOCK); }

SEC("uprobe")
int lwlock_wait_start(struct pt_regs *ctx) { return set_waiting(WAIT_LWLOCK); }

SEC("uprobe")
int lock_wait_done(struct pt_regs *ctx) { return set_waiting(WAIT_OTHER); }
