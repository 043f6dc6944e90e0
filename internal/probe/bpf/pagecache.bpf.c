/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How much did the kernel read ahead for a query? The readahead window
 * chosen at each synchronous and asynchronous readahead, in pages. Part
 * of the file system family (--fs): a read that triggered readahead
 * missed the page cache.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "state.bpf.h"

static __always_inline int readahead(struct trace_event_raw_page_cache_ra_op *ctx)
{
	struct thread_state *ts = thread_current();

	if (ts && ts->query_start_ns)
		ts->acct.readahead_pages += BPF_CORE_READ(ctx, size);
	return 0;
}

SEC("tracepoint/readahead/page_cache_sync_ra")
int fs_ra_sync(struct trace_event_raw_page_cache_ra_op *ctx) { return readahead(ctx); }

SEC("tracepoint/readahead/page_cache_async_ra")
int fs_ra_async(struct trace_event_raw_page_cache_ra_op *ctx) { return readahead(ctx); }
