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

/* What a sleeping thread was waiting for. */
enum wait_kind {
	WAIT_OTHER = 0,
	WAIT_IO = 1,
	WAIT_LOCK = 2,
	WAIT_LWLOCK = 3,
};

/*
 * Where a thread in a query spends its time, in task-local storage: the
 * scheduler hooks run on every context switch and wakeup of the machine,
 * and for a task without storage the lookup is a pointer test, not a hash
 * lookup. Created at the first query__start of a backend.
 */
struct waterfall {
	__u64 oncpu_since;    /* on CPU since (0: off) */
	__u64 runnable_since; /* runnable, not running, since (0: not) */
	__u64 asleep_since;   /* asleep since (0: not) */
	__u64 cpu_ns, runq_ns;
	__u64 wait_ns[4];     /* asleep, by enum wait_kind */
	__u64 io_wait_at_sys; /* wait_ns[WAIT_IO] when the current fs syscall began */
	__u8 in_query;
	__u8 in_fs;           /* inside a file system syscall */
	__u8 waiting_for;     /* enum wait_kind set by lock probes, else 0 */
	__u8 asleep_kind;     /* enum wait_kind of the current sleep */
	__u8 pad[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct waterfall);
} waterfalls SEC(".maps");

static __always_inline struct waterfall *waterfall_of(struct task_struct *task)
{
	return bpf_task_storage_get(&waterfalls, task, 0, 0);
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
