/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Did the query find its pages in shared buffers? buffer__read__done fires
 * on every buffer access, hits included: too often for the default mode,
 * so it is attached only on request (--buffers). Its last argument says
 * whether the buffer was found.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "counters.bpf.h"
#include "state.bpf.h"
#include "usdt.bpf.h"

SEC("uprobe")
int buffers_read_done(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	__s64 found;

	if (!ts || !ts->query_start_ns)
		return 0;
	if (usdt_arg(ctx, 7, &found)) {
		stat_inc(STAT_USDT_ARG_FAULT);
		return 0;
	}
	if (found)
		ts->acct.shared_hit++;
	else
		ts->acct.shared_read++;
	return 0;
}
