/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Maps and helpers shared by the program families. Every map is
 * preallocated and sized; a failed insert is counted, never silent.
 */
#ifndef MAPS_BPF_H
#define MAPS_BPF_H

#include "dbiolat.h"
#include "bits.bpf.h"

#define MAX_PROCS 16384
#define MAX_THREADS 16384
#define MAX_INFLIGHT 8192
#define MAX_BLK_KEYS 4096

/*
 * The state of one traced thread. An entry exists exactly for the threads
 * of traced processes (made at fork, or by Go when it attaches), so one
 * lookup both filters and finds the state on every hot path.
 */
struct thread_state {
	__u32 tgid;
	__u32 pad0;
	__u64 query_start_ns; /* 0 when not in a query */
	__u64 query_seq;      /* increments per query: tags block requests */
	__u64 sys_start_ns;   /* in a file system syscall since */
	enum fs_op sys_op;    /* the kind of that syscall */
	__u32 leader_tid;     /* a parallel worker's leader backend, else 0 */
	__u8 title_seen;      /* the title was read for a leader (once set) */
	__u8 pad1[3];
	__u32 blk_inflight;   /* block requests of this thread in flight */
	__u32 blk_submitted;  /* block requests this thread started, ever */
	__u32 blk_at_sys;     /* blk_submitted when the current fs syscall began */
	__u64 ra_at_sys;      /* acct.readahead_pages then */
	__u64 blk_busy_since; /* when blk_inflight went from 0 to 1 */
	struct io_acct fs_total[FS_OPS]; /* since attach; folded into proc_totals at exit */
	struct query_acct acct;
};

/*
 * Task-local state (struct task_local in dbiolat.h): for a task without
 * it, the lookup is a pointer test, which is what makes hooks on every
 * context switch and every socket call of the machine affordable. Created
 * by Go for the processes it tracks and in proc_fork for their children.
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

static __always_inline struct waterfall *waterfall_of(struct task_struct *task)
{
	struct task_local *tl = task_local_of(task);

	return tl ? &tl->wf : NULL;
}

static __always_inline struct waterfall *waterfall_current(void)
{
	return waterfall_of(bpf_get_current_task_btf());
}

/* A block request from io_start to io_done. */
struct inflight {
	__u64 start_ns;
	__u64 issue_ns;
	__u64 query_seq;
	__u32 tid;
	__u32 tgid; /* 0 when the owner is not traced */
	__u32 dev;
	__u32 bytes;
	__u8 op;
	__u8 owner;
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc_info);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_THREADS);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, __u64);
	__type(value, struct inflight);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc_io);
} proc_totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_BLK_KEYS);
	__type(key, struct blk_key);
	__type(value, struct blk_io);
} blk_totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HIST_IDS);
	__type(key, enum hist_id);
	__type(value, struct hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_IDS);
	__type(key, enum stat_id);
	__type(value, __u64);
} stats SEC(".maps");

/* Query records. Go sizes it before load; producers never wake the reader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

/* Process runs (proc_run) at exit: rare, small. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} proc_runs SEC(".maps");

static __always_inline void stat_inc(enum stat_id id)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &id);

	if (v)
		*v += 1; /* per-CPU: no atomics needed */
}

static __always_inline void hist_add(enum hist_id id, __u64 v)
{
	struct hist *h = bpf_map_lookup_elem(&hists, &id);
	__u32 slot = log2_slot(v);

	if (!h)
		return;
	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	h->slots[slot] += 1;
	h->sum += v;
}

/* For counters only their own thread writes: no atomics needed. */
static __always_inline void acct_add_own(struct io_acct *a, __u64 bytes, __u64 ns)
{
	a->count++;
	a->bytes += bytes;
	a->ns += ns;
}

static __always_inline void acct_add(struct io_acct *a, __u64 bytes, __u64 ns)
{
	__sync_fetch_and_add(&a->count, 1);
	__sync_fetch_and_add(&a->bytes, bytes);
	__sync_fetch_and_add(&a->ns, ns);
}

/* The state of a traced thread, NULL for every other thread. */
static __always_inline struct thread_state *thread_of(__u32 tid)
{
	return bpf_map_lookup_elem(&threads, &tid);
}

#endif /* MAPS_BPF_H */
