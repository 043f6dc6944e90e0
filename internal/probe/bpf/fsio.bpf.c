/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How long did file system calls take? Entry and exit tracepoints of the
 * file I/O syscalls only (never raw_syscalls: that would run on every
 * syscall). Time from entry to exit is what the database waited, the same
 * interval PostgreSQL's track_io_timing measures around pread/pwrite.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "charged.bpf.h"
#include "files.bpf.h"

#define POSIX_FADV_WILLNEED 3
#define FS_URING FS_OPS /* the op of an io_uring_enter until its requests tell */

/* read/write/readv/writev also serve pipes and sockets: count regular files and block devices only. */
static __always_inline int is_file(int fd)
{
	umode_t type = file_type(file_of(fd));

	return type == S_IFREG || type == S_IFBLK;
}

static __always_inline int fs_enter(__u32 op, int fd, int check_fd)
{
	struct thread_state *ts = thread_current();
	struct waterfall *wf;

	if (!ts || (check_fd && !is_file(fd)))
		return 0;
	find_leader(ts);
	ts->sys_op = op;
	ts->uring_reads = ts->uring_writes = 0;
	if (ts->query_start_ns && (wf = waterfall_current()))
		wf->in_fs = 1; /* a sleep from here to the exit is waiting for I/O */
	if (op == FS_READ || op == FS_URING) { /* what tells a miss at its end */
		ts->nvcsw_at_sys = bpf_get_current_task_btf()->nvcsw;
		ts->blk_at_sys = ts->blk_submitted;
		ts->ra_at_sys = ts->ra_pages;
	}
	ts->sys_start_ns = bpf_ktime_get_ns();
	return 0;
}

/*
 * A read missed the page cache when, during the call, the thread slept
 * (a voluntary context switch: waiting for a page being read, or for a
 * FUSE daemon's answer) or had to start block requests or readahead itself
 * (on a fast device the reader may never sleep, but it paid for the miss).
 * Else the page cache served it. Every read is one or the other.
 */
static __always_inline __u32 read_class(struct thread_state *ts)
{
	if (bpf_get_current_task_btf()->nvcsw != ts->nvcsw_at_sys || ts->blk_submitted != ts->blk_at_sys ||
	    ts->ra_pages != ts->ra_at_sys)
		return FS_READ_MISS;
	return FS_READ_HIT;
}

/*
 * n operations of one kind that took ns: the thread's, and the query's it
 * serves. Only the thread itself writes its totals, here, so plain adds
 * do; a query's counters are also written by its parallel workers,
 * atomically.
 */
static __always_inline void fs_account(struct thread_state *ts, __u32 op, __u64 n, __u64 bytes, __u64 ns)
{
	struct thread_state *q;
	__u32 class;

	if (op >= FS_OPS)
		return;
	class = op == FS_READ ? read_class(ts) : 0;

	acct_addn_own(&ts->fs_total[op], n, bytes, ns);
	if (class)
		acct_addn_own(&ts->fs_total[class], n, bytes, ns);
	/* The query it serves: a parallel worker's leader's, an I/O worker's
	 * or a storage engine's requester's, else its own. */
	q = charged(ts);
	if (!q && ts->query_start_ns)
		q = ts;
	if (ts->engine) { /* the engine's calls are the layer below the database's: apart */
		if (q) {
			acct_addn(&q->acct.engine_fs[op], n, bytes, ns);
			if (class)
				acct_addn(&q->acct.engine_fs[class], n, bytes, ns);
		}
		return;
	}
	unit_hist_add(ts->unit, HIST_FS_READ + op, ns);
	if (class)
		unit_hist_add(ts->unit, class == FS_READ_MISS ? HIST_FS_READ_MISS : HIST_FS_READ_HIT, ns);
	if (!q)
		return;
	acct_addn(&q->acct.fs[op], n, bytes, ns);
	if (class)
		acct_addn(&q->acct.fs[class], n, bytes, ns);
}

static __always_inline int fs_exit(struct syscall_trace_exit *ctx)
{
	struct thread_state *ts = thread_current();
	struct waterfall *wf;
	__u64 now, ns, bytes, wns;
	__u32 op, reads, writes;

	if (!ts || !ts->sys_start_ns)
		return 0;
	now = bpf_ktime_get_ns();
	ns = now - ts->sys_start_ns;
	if (ts->query_start_ns && (wf = waterfall_current()))
		wf->in_fs = 0;
	if (crossed_pause(ts->sys_start_ns, now)) {
		ts->sys_start_ns = 0;
		return 0;
	}
	ts->sys_start_ns = 0;
	op = ts->sys_op;
	if (op != FS_URING) {
		bytes = (op != FS_SYNC && ctx->ret > 0) ? ctx->ret : 0;
		fs_account(ts, op, 1, bytes, ns);
		return 0;
	}
	/* The reads and writes it submitted, their bytes to come at completion;
	 * a call that submitted both shares its time between them by request. */
	reads = ts->uring_reads;
	writes = ts->uring_writes;
	if (!reads && !writes)
		return 0;
	wns = ns * writes / (reads + writes);
	if (writes)
		fs_account(ts, FS_WRITE, writes, 0, wns);
	if (reads)
		fs_account(ts, FS_READ, reads, 0, ns - wns);
	return 0;
}

#define FS_SYSCALL(name, op, check_fd)                                  \
	SEC("tracepoint/syscalls/sys_enter_" #name)                     \
	int fs_enter_##name(struct syscall_trace_enter *ctx)            \
	{                                                               \
		return fs_enter(op, (int)ctx->args[0], check_fd);       \
	}                                                               \
	SEC("tracepoint/syscalls/sys_exit_" #name)                      \
	int fs_exit_##name(struct syscall_trace_exit *ctx)              \
	{                                                               \
		return fs_exit(ctx);                                    \
	}

FS_SYSCALL(read, FS_READ, 1)
FS_SYSCALL(readv, FS_READ, 1)
FS_SYSCALL(pread64, FS_READ, 0)
FS_SYSCALL(preadv, FS_READ, 0)
FS_SYSCALL(preadv2, FS_READ, 0)
FS_SYSCALL(write, FS_WRITE, 1)
FS_SYSCALL(writev, FS_WRITE, 1)
FS_SYSCALL(pwrite64, FS_WRITE, 0)
FS_SYSCALL(pwritev, FS_WRITE, 0)
FS_SYSCALL(pwritev2, FS_WRITE, 0)
FS_SYSCALL(fsync, FS_SYNC, 0)
FS_SYSCALL(fdatasync, FS_SYNC, 0)
FS_SYSCALL(sync_file_range, FS_SYNC, 0)
FS_SYSCALL(io_uring_enter, FS_URING, 0)

/*
 * io_uring (MariaDB's InnoDB reads ahead and writes pages back this way):
 * an io_uring_enter that submits reads or writes is the thread's
 * file-system reads or writes, one per request, timed as the call, the
 * span performance_schema times InnoDB's submissions by; a buffered read
 * the page cache can serve is done within it. Their bytes come with each
 * request's completion, wherever it completes, and are the submitter's
 * (and its query's, if still running). Syncs through io_uring are not
 * counted (InnoDB syncs with fdatasync).
 */
struct uring_req {
	__u32 tid;   /* the submitter */
	__u32 op;    /* FS_READ or FS_WRITE */
	__u64 seq;   /* its query then (query_seq) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* the request (struct io_kiocb *) */
	__type(value, struct uring_req);
} uring_reqs SEC(".maps");

SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(fs_uring_submit, struct io_kiocb *req)
{
	struct thread_state *ts = thread_current();
	struct uring_req r;
	__u64 key = (__u64)req;

	if (!ts || !ts->sys_start_ns || ts->sys_op != FS_URING)
		return 0;
	switch (req->opcode) {
	case IORING_OP_READV:
	case IORING_OP_READ_FIXED:
	case IORING_OP_READ:
		ts->uring_reads++;
		r.op = FS_READ;
		break;
	case IORING_OP_WRITEV:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_WRITE:
		ts->uring_writes++;
		r.op = FS_WRITE;
		break;
	default:
		return 0;
	}
	r.tid = (__u32)bpf_get_current_pid_tgid();
	r.seq = ts->query_seq;
	if (bpf_map_update_elem(&uring_reqs, &key, &r, BPF_ANY))
		stat_inc(STAT_INFLIGHT_FULL);
	return 0;
}

SEC("tp_btf/io_uring_complete")
int BPF_PROG(fs_uring_complete, struct io_ring_ctx *ring, void *req, struct io_uring_cqe *cqe)
{
	__u64 key = (__u64)req;
	struct uring_req *r = bpf_map_lookup_elem(&uring_reqs, &key);
	struct thread_state *ts;
	__u32 op;
	__s32 res;

	if (!r)
		return 0;
	res = BPF_CORE_READ(cqe, res);
	op = r->op == FS_WRITE ? FS_WRITE : FS_READ;
	ts = thread_of(r->tid);
	if (ts && res > 0) {
		__sync_fetch_and_add(&ts->fs_total[op].bytes, res);
		if (ts->query_start_ns && ts->query_seq == r->seq)
			__sync_fetch_and_add(&ts->acct.fs[op].bytes, res);
	}
	bpf_map_delete_elem(&uring_reqs, &key);
	return 0;
}

/*
 * Read-ahead advice: PostgreSQL's prefetch (PrefetchBuffer, and from 17
 * its read streams) asks the kernel with posix_fadvise(WILLNEED) to start
 * reading blocks it will want soon. Counted for the query it serves, as
 * calls and bytes advised; the reads themselves are timed as any other.
 */
SEC("tracepoint/syscalls/sys_enter_fadvise64")
int fs_enter_fadvise64(struct syscall_trace_enter *ctx)
{
	struct thread_state *ts = thread_current(), *q;

	if (!ts || ctx->args[3] != POSIX_FADV_WILLNEED)
		return 0;
	find_leader(ts);
	q = charged(ts);
	if (!q && ts->query_start_ns)
		q = ts;
	if (q) {
		__sync_fetch_and_add(&q->acct.prefetch.count, 1);
		__sync_fetch_and_add(&q->acct.prefetch.bytes, ctx->args[2]);
	}
	return 0;
}
