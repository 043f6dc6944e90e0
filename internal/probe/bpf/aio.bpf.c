/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reads another process performs for a query: PostgreSQL 18's
 * asynchronous I/O with io_method=worker. A backend stages a read on a
 * handle in shared memory (mapped before the fork, so at the same address
 * in every process of the instance); an I/O worker performs it, then
 * completes it, and the backend sleeps on the wait event
 * IO/AioIoCompletion meanwhile. The handle is the first argument of each
 * step: it links the worker's read to the query that asked for it,
 * without reading any of the database's structures. While the worker
 * performs it, its file system and block I/O are charged to that query
 * (charged.bpf.h), and the read itself counts in the query's aio_read.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "charged.bpf.h"

#define MAX_AIO_HANDLES 8192 /* handles in flight: processes x io_max_concurrency; LRU beyond (counted as aio_unseen) */

struct aio_key {
	__u32 instance;
	__u32 pad;
	__u64 handle;
};

/* LRU: a handle's entry is rewritten at its next staging, never deleted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_AIO_HANDLES);
	__type(key, struct aio_key);
	__type(value, struct query_ref);
} aio_owners SEC(".maps");

static __always_inline int aio_key_of(struct pt_regs *ctx, struct thread_state *ts, struct aio_key *key)
{
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &ts->tgid);

	if (!pi)
		return -1;
	key->instance = pi->instance;
	key->handle = PT_REGS_PARM1(ctx);
	return 0;
}

/*
 * A process stages a read: remember the query it serves, its own, or, for
 * a parallel worker, its leader's (whose query its reads are: charged.bpf.h).
 */
SEC("uprobe")
int aio_stage(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current(), *q;
	struct query_ref owner = {};
	struct aio_key key = {};

	if (!ts || aio_key_of(ctx, ts, &key))
		return 0;
	if (ts->query_start_ns) {
		owner.tid = (__u32)bpf_get_current_pid_tgid();
		owner.query_seq = ts->query_seq;
	} else {
		find_leader(ts);
		if ((q = charged(ts))) {
			owner.tid = ts->leader_tid;
			owner.query_seq = q->query_seq;
		}
	}
	bpf_map_update_elem(&aio_owners, &key, &owner, BPF_ANY);
	return 0;
}

/* A process performs a staged read: another's, it works for that query. */
SEC("uprobe")
int aio_perform(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	struct query_ref *owner;
	struct aio_key key = {};

	if (!ts || aio_key_of(ctx, ts, &key))
		return 0;
	owner = bpf_map_lookup_elem(&aio_owners, &key);
	if (!owner) {
		stat_inc(STAT_AIO_UNSEEN);
		return 0;
	}
	if (!owner->tid || owner->tid == (__u32)bpf_get_current_pid_tgid() || owner->tid == ts->leader_tid)
		return 0; /* staged outside a query, or performed by its own backend or parallel worker */
	serve(ts, owner);
	return 0;
}

/*
 * The read completes, its result the second argument (bytes, or -errno).
 * Completing wakes the backend, which may stage the handle again at once:
 * the window ends here, and the handle is not looked up again.
 */
SEC("uprobe")
int aio_complete(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current(), *q;
	__s64 result = (__s32)PT_REGS_PARM2(ctx);
	__u64 now = bpf_ktime_get_ns();

	if (!ts || !ts->serves_tid)
		return 0;
	q = charged(ts);
	if (q && !crossed_pause(ts->serves_since, now))
		acct_add(&q->acct.aio_read, result > 0 ? result : 0, now - ts->serves_since);
	ts->serves_tid = 0;
	return 0;
}
