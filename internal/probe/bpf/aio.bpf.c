/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reads another process or thread performs for a query: PostgreSQL 18's
 * asynchronous I/O with io_method=worker, and MySQL's InnoDB with
 * simulated AIO (below). A backend stages a read on a handle in shared
 * memory (mapped before the fork, so at the same address in every process
 * of the instance); an I/O worker performs it, then completes it, and the
 * backend sleeps on the wait event IO/AioIoCompletion meanwhile. The
 * handle is the first argument of each step: it links the worker's read
 * to the query that asked for it, without reading any of the database's
 * structures. While the worker performs it, its file system and block I/O
 * are charged to that query (charged.bpf.h), and the read itself counts
 * in the query's aio_read.
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

static __always_inline int aio_key_of(struct thread_state *ts, __u64 handle, struct aio_key *key)
{
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &ts->tgid);

	if (!pi)
		return -1;
	key->instance = pi->instance;
	key->handle = handle;
	return 0;
}

/*
 * The handoff's three steps, each by the handle that links them: a thread
 * stages a read (handoff_stage), another performs it (handoff_perform),
 * then completes it (handoff_complete).
 *
 * Staging remembers the query the read serves: the thread's own, or, for
 * a parallel worker, its leader's (whose query its reads are:
 * charged.bpf.h).
 */
static __always_inline void handoff_stage(struct thread_state *ts, struct aio_key *key)
{
	struct query_ref owner = {};
	struct thread_state *q;

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
	bpf_map_update_elem(&aio_owners, key, &owner, BPF_ANY);
}

/* A thread performs a staged read: another's, it works for that query,
 * which counts it among the reads done for it now (its sleeps meanwhile
 * wait for them: sched.bpf.c). A read whose staging was not seen is
 * counted where every read it performs was staged (staged_only). */
static __always_inline void handoff_perform(struct thread_state *ts, struct aio_key *key, bool staged_only)
{
	struct query_ref *owner = bpf_map_lookup_elem(&aio_owners, key);
	struct thread_state *q;

	if (!owner) {
		if (staged_only)
			stat_inc(STAT_AIO_UNSEEN);
		return;
	}
	if (!owner->tid || owner->tid == (__u32)bpf_get_current_pid_tgid() || owner->tid == ts->leader_tid)
		return; /* staged outside a query, or performed by its own thread or parallel worker */
	serve(ts, owner);
	if ((q = query_running(owner)))
		__sync_fetch_and_add(&q->aio_serving, 1);
}

/*
 * The read completes, its result in bytes (or -errno). Completing wakes
 * the query's thread, which may stage the handle again at once: the window
 * ends here, and the handle is not looked up again.
 */
static __always_inline void handoff_complete(struct thread_state *ts, __s64 result)
{
	__u64 now = bpf_ktime_get_ns();
	struct thread_state *q;

	if (!ts->serves_tid)
		return;
	q = charged(ts);
	if (q) {
		if (!crossed_pause(ts->serves_since, now))
			acct_add(&q->acct.aio_read, result > 0 ? result : 0, now - ts->serves_since);
		if (q->aio_serving)
			__sync_fetch_and_add(&q->aio_serving, -1);
	}
	ts->serves_tid = 0;
}

/*
 * PostgreSQL 18: each step's first argument is the handle; completion's
 * second, the result.
 */
SEC("uprobe")
int aio_stage(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	struct aio_key key = {};

	if (ts && !aio_key_of(ts, PT_REGS_PARM1(ctx), &key))
		handoff_stage(ts, &key);
	return 0;
}

SEC("uprobe")
int aio_perform(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	struct aio_key key = {};

	if (ts && !aio_key_of(ts, PT_REGS_PARM1(ctx), &key))
		handoff_perform(ts, &key, true);
	return 0;
}

SEC("uprobe")
int aio_complete(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();

	if (ts)
		handoff_complete(ts, (__s32)PT_REGS_PARM2(ctx));
	return 0;
}

/*
 * MySQL's InnoDB with simulated AIO (innodb_use_native_aio off, or where
 * io_setup is refused, as in a container): a query's thread queues a page
 * read, then sleeps until one of InnoDB's read I/O threads has performed
 * it. The handle is the page's frame, the read's buffer:
 *   void fil_io(const IORequest &, bool sync, const page_id_t &,
 *               const page_size_t &, ulint byte_offset, ulint len,
 *               void *buf, void *message)
 * queues it when not sync (buf: the first argument on the stack, past the
 * return address), and the I/O thread reads it with
 *   ssize_t SyncFileIO::execute(const IORequest &)
 * whose object holds the file, then the buffer (at 8), the length and the
 * offset; its return is the result. Both are C++ functions: their mangled
 * names say these signatures, so a version that changed them has no
 * symbol to attach to. Checked on MySQL 9.7.4 (Debian sid).
 */
SEC("uprobe")
int aio_innodb_stage(struct pt_regs *ctx)
{
	struct thread_state *ts;
	struct aio_key key = {};
	__u64 buf;

	if (PT_REGS_PARM2(ctx) & 0xff) /* sync: its own thread reads it */
		return 0;
	ts = thread_current();
	if (!ts || bpf_probe_read_user(&buf, sizeof(buf), (void *)(PT_REGS_SP(ctx) + 8)) || aio_key_of(ts, buf, &key))
		return 0;
	handoff_stage(ts, &key);
	return 0;
}

SEC("uprobe")
int aio_innodb_perform(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	struct aio_key key = {};
	__u64 buf;

	/* A query's thread reads for itself; InnoDB's other threads read
	 * synchronously too (purge, the page cleaner): not staged, not lost. */
	if (!ts || ts->query_start_ns || bpf_probe_read_user(&buf, sizeof(buf), (void *)(PT_REGS_PARM1(ctx) + 8)) ||
	    aio_key_of(ts, buf, &key))
		return 0;
	handoff_perform(ts, &key, false);
	return 0;
}

SEC("uretprobe")
int aio_innodb_performed(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();

	if (ts)
		handoff_complete(ts, (__s64)PT_REGS_RC(ctx));
	return 0;
}
