/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What did a userspace file system (FUSE: bindfs, Longhorn-like engines,
 * rbd-nbd's kin) do for a query? Each request a traced thread sends is
 * timed from fuse_request_send (in the sender) to fuse_request_end (in the
 * daemon, as it writes the answer), keyed by its connection and unique id.
 *
 * The daemon is tracked by Go as the instance's storage engine. With
 * --fs, its read of /dev/fuse shows which request it takes (the header's
 * unique id, read from its buffer as the call returns): from then until it
 * answers, it serves the query that sent it. Its file system calls go to
 * the query's engine_fs, its block requests to the query (charged.bpf.h),
 * its time serving to engine_ns and its CPU meanwhile to engine_cpu_ns
 * (counted by the scheduler hook while its waterfall says serving).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "counters.bpf.h"
#include "charged.bpf.h"
#include "files.bpf.h"

#define MAX_FUSE_PENDING 8192
#define FUSE_DEV ((10 << 20) | 229) /* /dev/fuse: misc major 10, FUSE_MINOR, as the kernel's dev_t */

struct fuse_key {
	__u32 conn; /* the connection: the mount's device number */
	__u32 pad;
	__u64 unique;
};

/* A request sent and not yet answered. */
struct fuse_pending {
	__u64 start_ns;
	struct query_ref query; /* the query it serves (tid: else the sender) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FUSE_PENDING);
	__type(key, struct fuse_key);
	__type(value, struct fuse_pending);
} fuse_pending SEC(".maps");

/* The current thread, a storage engine's, starts serving a request: count its CPU. */
static __always_inline void serving_cpu_start(__u64 now)
{
	struct task_local *tl = bpf_task_storage_get(&tasks, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!tl)
		return;
	tl->kind = PROC_STORAGE; /* as proc_fork marks an engine's threads, should its storage be new */
	tl->wf.serving = 1;
	tl->wf.serve_cpu_ns = 0;
	tl->wf.oncpu_since = now;
}

/* It answered: its CPU on the request. */
static __always_inline __u64 serving_cpu_end(__u64 now)
{
	struct waterfall *wf = waterfall_current();
	__u64 cpu;

	if (!wf || !wf->serving)
		return 0;
	cpu = wf->serve_cpu_ns + (wf->oncpu_since ? now - wf->oncpu_since : 0);
	wf->serving = 0;
	wf->oncpu_since = 0;
	return cpu;
}

SEC("tracepoint/fuse/fuse_request_send")
int fuse_send(struct trace_event_raw_fuse_request_send *ctx)
{
	struct thread_state *ts = thread_current(), *q;
	struct fuse_key k = {.conn = ctx->connection, .unique = ctx->unique};
	struct fuse_pending p = {};

	if (!ts || ts->engine) /* another process's; or the daemon sending queued background requests */
		return 0;
	p.start_ns = bpf_ktime_get_ns();
	p.query.tid = (__u32)bpf_get_current_pid_tgid();
	find_leader(ts);
	if ((q = charged(ts))) {
		p.query.tid = charged_tid(ts);
		p.query.query_seq = q->query_seq;
	} else if (ts->query_start_ns) {
		p.query.query_seq = ts->query_seq;
	}
	if (bpf_map_update_elem(&fuse_pending, &k, &p, BPF_ANY))
		stat_inc(STAT_FUSE_FULL);
	return 0;
}

SEC("tracepoint/fuse/fuse_request_end")
int fuse_end(struct trace_event_raw_fuse_request_end *ctx)
{
	struct fuse_key k = {.conn = ctx->connection, .unique = ctx->unique};
	struct fuse_pending *p = bpf_map_lookup_elem(&fuse_pending, &k);
	struct thread_state *ts = thread_current(), *q;
	__u64 now = bpf_ktime_get_ns(), ns;
	__u32 len = ctx->len;

	if (!p)
		return 0;
	ns = now - p->start_ns;
	hist_add(HIST_FUSE, ns);
	q = query_running(&p->query);
	if (q) /* the answer's bytes past its header */
		acct_add(&q->acct.fuse, len > sizeof(struct fuse_out_header) ? len - sizeof(struct fuse_out_header) : 0, ns);
	/* The daemon answered: what it does next is not for this request. */
	if (ts && ts->serves_engine && ts->serves_tid == p->query.tid && ts->serves_seq == p->query.query_seq) {
		__u64 cpu = serving_cpu_end(now);

		if (q) {
			__sync_fetch_and_add(&q->acct.engine_ns, now - ts->serves_since);
			__sync_fetch_and_add(&q->acct.engine_cpu_ns, cpu);
			q->acct.engine_tgid = ts->tgid;
		}
		ts->serves_tid = 0;
		ts->serves_engine = 0;
	}
	bpf_map_delete_elem(&fuse_pending, &k);
	return 0;
}

/* The FUSE connection an fd of the current task reads requests from, else 0. */
static __always_inline __u32 fuse_conn_of(int fd)
{
	struct file *f = file_of(fd);
	struct fuse_dev *fud;

	if (file_type(f) != S_IFCHR || BPF_CORE_READ(f, f_inode, i_rdev) != FUSE_DEV)
		return 0;
	fud = BPF_CORE_READ(f, private_data);
	return fud ? BPF_CORE_READ(fud, fc, dev) : 0;
}

/* Part of the file system family (--fs): it runs on every read syscall. */
SEC("tracepoint/syscalls/sys_enter_read")
int fs_engine_enter_read(struct syscall_trace_enter *ctx)
{
	struct thread_state *ts = thread_current();
	__u32 conn;

	if (!ts || !ts->engine || !(conn = fuse_conn_of((int)ctx->args[0])))
		return 0;
	ts->fuse_conn = conn;
	ts->fuse_buf = ctx->args[1];
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_read")
int fs_engine_exit_read(struct syscall_trace_exit *ctx)
{
	struct thread_state *ts = thread_current();
	struct fuse_in_header h;
	struct fuse_pending *p;
	struct fuse_key k = {};

	void *buf;

	if (!ts || !(buf = (void *)ts->fuse_buf))
		return 0;
	ts->fuse_buf = 0;
	if (ctx->ret < (long)sizeof(h) || bpf_probe_read_user(&h, sizeof(h), buf))
		return 0;
	k.conn = ts->fuse_conn;
	k.unique = h.unique;
	p = bpf_map_lookup_elem(&fuse_pending, &k);
	if (!p) {
		stat_inc(STAT_FUSE_UNSEEN);
		return 0;
	}
	serve(ts, &p->query);
	ts->serves_engine = 1;
	serving_cpu_start(ts->serves_since);
	return 0;
}
