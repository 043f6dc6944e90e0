/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How much did the kernel read ahead for a query? The readahead window
 * chosen at each synchronous and asynchronous readahead, in pages. Part
 * of the file system family (--fs): a read that triggered readahead
 * missed the page cache (fsio.bpf.c).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "charged.bpf.h"

static __always_inline int readahead(struct trace_event_raw_page_cache_ra_op *ctx)
{
	struct thread_state *ts = thread_current(), *q;
	__u64 pages = BPF_CORE_READ(ctx, size);

	if (!ts)
		return 0;
	ts->ra_pages += pages; /* only this thread writes it */
	q = charged(ts);
	if (!q && ts->query_start_ns)
		q = ts;
	if (q) /* a parallel worker's too: atomically */
		__sync_fetch_and_add(&q->acct.readahead_pages, pages);
	return 0;
}

SEC("tracepoint/readahead/page_cache_sync_ra")
int fs_ra_sync(struct trace_event_raw_page_cache_ra_op *ctx) { return readahead(ctx); }

SEC("tracepoint/readahead/page_cache_async_ra")
int fs_ra_async(struct trace_event_raw_page_cache_ra_op *ctx) { return readahead(ctx); }
