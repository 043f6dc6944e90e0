/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which block requests did a process cause, and how long did they take?
 * block_io_start runs in the submitter's context (checked on this kernel:
 * dd's requests show dd), so ownership is taken there and the request is
 * followed by its pointer, never by the PID current at completion, which is
 * an interrupt or a kworker.
 *
 * A query's requests are those it started (or its parallel workers did):
 * their count and bytes are the query's at their start; their time, when
 * they complete before the query ends (else they are counted late).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "charged.bpf.h"

#define MAX_INFLIGHT 8192
#define MAX_BLK_KEYS 4096
#define REQ_OP_MASK 0xff
#define PF_KTHREAD 0x00200000

/* RQF_FLUSH_SEQ, set from the kernel's BTF by Go (flushSeqFlag); 0: unknown. */
const volatile __u32 rqf_flush_seq = 0;

/* A block request from io_start to io_done. */
struct inflight {
	__u64 start_ns;
	__u64 issue_ns;
	__u64 query_seq; /* the query it serves, 0: none */
	__u32 tid;       /* the thread running that query */
	__u32 unit;      /* the owner's unit; 0 when it is not traced */
	__u32 dev;
	__u32 bytes;
	__u8 op;
	__u8 owner;
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BLK_KEYS);
	__type(key, struct blk_key);
	__type(value, struct blk_io);
} blk_totals SEC(".maps");

static __always_inline __u8 blk_op_of(struct request *rq)
{
	__u32 op = rq->cmd_flags & REQ_OP_MASK;

	if (op == REQ_OP_READ)
		return BLK_READ;
	if (op == REQ_OP_WRITE && rq->__data_len) /* without data: a cache flush */
		return BLK_WRITE;
	return BLK_OTHER;
}

/* The request starts in its submitter: a thread of ours serving a query
 * (its own, or for a parallel worker its leader's) makes it the query's. */
static __always_inline void blk_own(struct inflight *in, __u32 op, struct thread_state *ts, __u32 tid)
{
	struct thread_state *q;

	find_leader(ts);
	q = charged(ts);
	ts->blk_submitted++; /* only this thread writes it: it runs here */
	in->owner = OWNER_TRACED;
	in->unit = ts->unit;
	in->tid = q ? charged_tid(ts) : tid;
	if (!q && ts->query_start_ns)
		q = ts;
	barrier_var(op); /* keep the bound: the verifier loses what clang knows of blk_op_of */
	if (!q || op >= BLK_OPS)
		return;
	in->query_seq = q->query_seq;
	__sync_fetch_and_add(&q->acct.blk[op].count, 1);
	__sync_fetch_and_add(&q->acct.blk[op].bytes, in->bytes);
	if (ts->serves_engine) /* done for it by its storage engine */
		acct_add(&q->acct.engine_blk, in->bytes, 0);
	if (__sync_fetch_and_add(&q->blk_inflight, 1) == 0)
		q->blk_busy_since = in->start_ns;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(blk_start, struct request *rq)
{
	__u64 key = (__u64)rq;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct task_struct *task = bpf_get_current_task_btf();
	struct gendisk *disk = rq->q->disk;
	struct thread_state *ts = thread_in(task_local_of(task));
	struct inflight in = {};
	__u8 op = blk_op_of(rq);
	__u32 submitter;

	in.start_ns = bpf_ktime_get_ns();
	in.op = op;
	in.bytes = rq->__data_len;
	if (disk)
		in.dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
	if (!ts && (submitter = io_uring_submitter(task))) { /* an io_uring worker's: its submitter's */
		tid = submitter;
		ts = thread_of(tid);
	}
	if (ts)
		blk_own(&in, op, ts, tid);
	else if (task->flags & PF_KTHREAD)
		in.owner = OWNER_KERNEL;
	else
		in.owner = OWNER_OTHER;
	if (bpf_map_update_elem(&inflight, &key, &in, BPF_ANY))
		stat_inc(STAT_INFLIGHT_FULL);
	return 0;
}

/*
 * Bios merge into a request after it started, while it waits in the
 * submitter's plug or the scheduler: its size is final only at issue.
 * The growth is added to its query, if that query still runs.
 */
static __always_inline void blk_grown(struct inflight *in, __u32 bytes)
{
	struct thread_state *ts;
	__u32 op = in->op;

	if (bytes <= in->bytes)
		return;
	if (in->query_seq && op < BLK_OPS && (ts = thread_of(in->tid)) && ts->query_start_ns &&
	    ts->query_seq == in->query_seq)
		__sync_fetch_and_add(&ts->acct.blk[op].bytes, bytes - in->bytes);
	in->bytes = bytes;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(blk_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct inflight *in = bpf_map_lookup_elem(&inflight, &key);

	if (!in)
		return 0;
	in->issue_ns = bpf_ktime_get_ns(); /* a requeued request is issued again: device time counts from the last issue */
	blk_grown(in, rq->__data_len);
	return 0;
}

/* The query's request is done: its time is the query's if the query still runs. */
static __always_inline void blk_query_done(struct inflight *in, __u32 op, __u64 now, __u64 ns, __u64 queue_ns,
					   __u64 device_ns)
{
	struct thread_state *ts = thread_of(in->tid);

	if (!ts || !ts->query_start_ns || ts->query_seq != in->query_seq) {
		stat_inc(STAT_BLK_LATE);
		return;
	}
	__sync_fetch_and_add(&ts->acct.blk[op].ns, ns);
	__sync_fetch_and_add(&ts->acct.blk_queue_ns, queue_ns);
	__sync_fetch_and_add(&ts->acct.blk_device_ns, device_ns);
	/* Busy time: wall time with any request of the query in flight. */
	if (__sync_fetch_and_add(&ts->blk_inflight, -1) == 1 && ts->blk_busy_since)
		__sync_fetch_and_add(&ts->acct.blk_busy_ns, now - ts->blk_busy_since);
}

/*
 * A request in a flush sequence is not done at this io_done: it is the
 * flush machinery's own request (one per device flush, shared by the
 * flushes waiting for it), which never passes io_start, or the data step
 * of a write with a flush before or after it, which passes io_done again,
 * as itself, once its sequence ends. The requests that asked for the
 * flush are timed whole, from their io_start to that last io_done.
 */
static __always_inline bool blk_in_flush_sequence(struct request *rq)
{
	return rq->rq_flags & rqf_flush_seq;
}

SEC("tp_btf/block_io_done")
int BPF_PROG(blk_done, struct request *rq)
{
	__u64 key = (__u64)rq, now = bpf_ktime_get_ns(), ns, queue_ns = 0, device_ns;
	struct inflight *in;
	struct blk_key bk = {};
	struct blk_io *b;
	__u32 op;

	if (blk_in_flush_sequence(rq))
		return 0;
	in = bpf_map_lookup_elem(&inflight, &key);
	if (!in || crossed_pause(in->start_ns, now)) { /* not seen whole */
		stat_inc(STAT_BLK_UNSEEN);
		if (in)
			bpf_map_delete_elem(&inflight, &key);
		return 0;
	}
	ns = now - in->start_ns;
	if (in->issue_ns && in->issue_ns >= in->start_ns) {
		queue_ns = in->issue_ns - in->start_ns;
		device_ns = now - in->issue_ns;
	} else {
		device_ns = ns;
	}

	bk.dev = in->dev;
	bk.unit = in->unit;
	bk.op = in->op;
	bk.owner = in->owner;
	b = bpf_map_lookup_elem(&blk_totals, &bk);
	if (!b) {
		static const struct blk_io zero;

		bpf_map_update_elem(&blk_totals, &bk, &zero, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&blk_totals, &bk);
	}
	if (b) {
		acct_add(&b->io, in->bytes, ns);
		__sync_fetch_and_add(&b->queue_ns, queue_ns);
		__sync_fetch_and_add(&b->device_ns, device_ns);
	} else {
		stat_inc(STAT_BLK_TOTALS_FULL);
	}

	op = in->op;
	if (in->owner == OWNER_TRACED && op < BLK_OPS) {
		unit_hist_add(in->unit, HIST_BLK_READ + op, ns);
		if (op == BLK_READ || op == BLK_WRITE)
			unit_hist_add(in->unit, HIST_BLK_READ_SIZE + op, in->bytes);
		if (in->query_seq)
			blk_query_done(in, op, now, ns, queue_ns, device_ns);
	}
	bpf_map_delete_elem(&inflight, &key);
	return 0;
}

/* Bios of ours merged into a request already queued: why requests are big. */
static __always_inline int blk_merge(void)
{
	if (thread_current())
		stat_inc(STAT_BLK_MERGES);
	return 0;
}

SEC("tp_btf/block_bio_backmerge")
int BPF_PROG(blk_backmerge, struct bio *bio) { return blk_merge(); }

SEC("tp_btf/block_bio_frontmerge")
int BPF_PROG(blk_frontmerge, struct bio *bio) { return blk_merge(); }
