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
	if (ts->query_start_ns && (wf = waterfall_current()))
		wf->in_fs = 1; /* a sleep from here to the exit is waiting for I/O */
	if (op == FS_READ) { /* what tells a miss at its end */
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
 * Only the thread itself writes its totals, here, so plain adds do; a
 * query's counters are also written by its parallel workers, atomically.
 */
static __always_inline int fs_exit(struct syscall_trace_exit *ctx)
{
	struct thread_state *ts = thread_current();
	struct thread_state *q;
	struct waterfall *wf;
	__u64 ns, bytes;
	__u32 op, class;

	if (!ts || !ts->sys_start_ns)
		return 0;
	ns = bpf_ktime_get_ns() - ts->sys_start_ns;
	ts->sys_start_ns = 0;
	if (ts->query_start_ns && (wf = waterfall_current()))
		wf->in_fs = 0;
	op = ts->sys_op;
	if (op >= FS_OPS)
		return 0;
	bytes = (op != FS_SYNC && ctx->ret > 0) ? ctx->ret : 0;
	class = op == FS_READ ? read_class(ts) : 0;

	acct_add_own(&ts->fs_total[op], bytes, ns);
	if (class)
		acct_add_own(&ts->fs_total[class], bytes, ns);
	/* The query it serves: a parallel worker's leader's, an I/O worker's
	 * or a storage engine's requester's, else its own. */
	q = charged(ts);
	if (!q && ts->query_start_ns)
		q = ts;
	if (ts->engine) { /* the engine's calls are the layer below the database's: apart */
		if (q) {
			acct_add(&q->acct.engine_fs[op], bytes, ns);
			if (class)
				acct_add(&q->acct.engine_fs[class], bytes, ns);
		}
		return 0;
	}
	hist_add(HIST_FS_READ + op, ns);
	if (class)
		hist_add(class == FS_READ_MISS ? HIST_FS_READ_MISS : HIST_FS_READ_HIT, ns);
	if (!q)
		return 0;
	acct_add(&q->acct.fs[op], bytes, ns);
	if (class)
		acct_add(&q->acct.fs[class], bytes, ns);
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
