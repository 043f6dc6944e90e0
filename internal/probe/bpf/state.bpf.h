/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes and threads are traced, and their state: the filter
 * every hot path applies first. A traced thread (made so at fork in
 * proc.bpf.c, or by Go when it attaches) holds a slot of thread_states
 * from then to its exit, named in its task-local state: a hook finds it
 * from the task in hand at the cost of an array index, and a task of no
 * traced process by a pointer test. `threads` names the slot by thread
 * id, for what concerns another thread (a block request's completion, a
 * parallel worker's leader) and for Go.
 */
#ifndef STATE_BPF_H
#define STATE_BPF_H

#include "dbiolat.h"

#define MAX_PROCS 16384
#define MAX_THREADS 16384

/* The state of one traced thread. */
struct thread_state {
	__u32 tgid;
	/* What its I/O totals, block requests and run are kept under, for
	 * roles: its process, or for a MySQL server's thread the thread
	 * itself (a server's threads have roles of their own). */
	__u32 unit;
	__u64 query_start_ns; /* 0 when not in a query */
	__u64 query_seq;      /* increments per query: tags block requests */
	__u64 sys_start_ns;   /* in a file system syscall since */
	enum fs_op sys_op;    /* the kind of that syscall */
	__u32 leader_tid;     /* a parallel worker's leader backend, else 0 */
	__u32 serves_tid;     /* an I/O worker or a storage engine: the thread whose request it serves now, else 0 */
	__u32 tid;            /* the thread holding this slot; 0: a free slot */
	__u64 serves_seq;     /* that backend's query (query_seq) */
	__u64 serves_since;   /* since when */
	__u8 title_seen;      /* the title was read for a leader (once set) */
	__u8 engine;          /* a thread of a storage engine (PROC_STORAGE) */
	__u8 serves_engine;   /* it serves as the engine: its I/O is done for serves_tid's query, not its own */
	__u8 pad1;
	__u32 blk_inflight;   /* block requests of the current query in flight */
	__u32 blk_submitted;  /* block requests this thread started, ever */
	__u32 aio_serving;    /* threads performing reads for the current query now (aio.bpf.c) */
	__u32 pad3;
	__u64 blk_busy_since; /* when blk_inflight went from 0 to 1 */
	__u64 ra_pages;       /* pages the kernel read ahead for this thread, ever */
	/* When the current fs syscall began: what tells a page-cache miss at its end. */
	__u64 nvcsw_at_sys;   /* the thread's voluntary context switches (sleeps) */
	__u64 ra_at_sys;      /* ra_pages */
	__u32 blk_at_sys;     /* blk_submitted */
	__u32 fuse_conn;      /* an engine's read of /dev/fuse in progress: the FUSE connection... */
	__u64 fuse_buf;       /* ...and the buffer the request's header lands in */
	__u64 mysql_conn;     /* a MySQL thread: the connection (its socket) whose command its query is */
	__u32 uring_reads;    /* read requests the io_uring_enter in progress submitted */
	__u32 uring_writes;   /* and write requests */
	struct io_acct fs_total[FS_ACCTS]; /* since attach, by enum fs_op; folded into proc_totals at exit */
	/* The time of its queries measured whole since attach, and their
	 * waterfall's boxes: top's row of a backend whose queries the kernel
	 * counts (query_end). */
	__u64 queries_ns;
	__u64 queries_box_ns[BOXES];
	struct query_acct acct;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc_info);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_states SEC(".maps");

/* A traced thread's slot of thread_states, by thread id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, __u32);
} threads SEC(".maps");

/* The free slots, all of them at load (Go pushes them). Last in, first
 * out: the slots in use stay at the bottom, where Go reads them. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK);
	__uint(max_entries, MAX_THREADS);
	__type(value, __u32);
} free_slots SEC(".maps");

/*
 * Task-local state (struct task_local in dbiolat.h): for a task without
 * it, the lookup is a pointer test, which is what makes hooks on every
 * context switch and every socket call of the machine affordable.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_local);
} tasks SEC(".maps");

static __always_inline struct task_local *task_local_of(struct task_struct *task)
{
	/* Most tasks have no BPF storage at all: one load says so, no helper call. */
	if (!task->bpf_storage)
		return NULL;
	return bpf_task_storage_get(&tasks, task, 0, 0);
}

/* The state of a traced thread, given its task-local state; NULL for
 * every other thread. (Its slot is its own: proc_exit, which frees it,
 * runs in the thread itself and forgets it there.) */
static __always_inline struct thread_state *thread_in(struct task_local *tl)
{
	__u32 slot;

	if (!tl || !tl->slot)
		return NULL;
	slot = tl->slot - 1;
	return bpf_map_lookup_elem(&thread_states, &slot);
}

static __always_inline struct thread_state *thread_current(void)
{
	return thread_in(task_local_of(bpf_get_current_task_btf()));
}

/* The state of traced thread tid, for a hook running in another task. */
static __always_inline struct thread_state *thread_of(__u32 tid)
{
	struct thread_state *ts;
	__u32 *slot = bpf_map_lookup_elem(&threads, &tid);

	if (!slot)
		return NULL;
	ts = bpf_map_lookup_elem(&thread_states, slot);
	return ts && ts->tid == tid ? ts : NULL;
}

static __always_inline struct waterfall *waterfall_of(struct task_struct *task)
{
	struct task_local *tl = task_local_of(task);

	return tl ? &tl->wf : NULL;
}

static __always_inline struct waterfall *waterfall_current(void)
{
	return waterfall_of(bpf_get_current_task_btf());
}

#endif /* STATE_BPF_H */
