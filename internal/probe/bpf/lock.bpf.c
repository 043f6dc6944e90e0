/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Is a query asleep on a lock? PostgreSQL's lock__wait__start/done and
 * lwlock__wait__start/done USDT probes bracket the waits; they fire only
 * when a backend actually has to wait, so they cost nothing otherwise. The
 * scheduler hook charges the sleep inside the bracket to the lock.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "state.bpf.h"

/* box: what the coming sleeps wait for; 0 when the wait is over. */
static __always_inline int set_waiting(__u8 box)
{
	struct waterfall *wf = waterfall_current();

	if (wf && wf->in_query)
		wf->waiting_for = box;
	return 0;
}

SEC("uprobe")
int lock_wait_start(struct pt_regs *ctx) { return set_waiting(BOX_LOCK); }

SEC("uprobe")
int lock_lwlock_start(struct pt_regs *ctx) { return set_waiting(BOX_LWLOCK); }

SEC("uprobe")
int lock_wait_done(struct pt_regs *ctx) { return set_waiting(0); }
