/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every family counts into: the drop counters (enum stat_id), the
 * log2 histograms (enum hist_id) and the I/O accounts. Every failed insert
 * or reserve is counted here, never silent.
 */
#ifndef COUNTERS_BPF_H
#define COUNTERS_BPF_H

#include "dbiolat.h"
#include "bits.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HIST_IDS);
	__type(key, enum hist_id);
	__type(value, struct hist);
} hists SEC(".maps");

/*
 * The I/O histograms again per unit, allocated as units do I/O (3 to 6
 * per busy unit; Go deletes an exited unit's once folded): 4,096 take at
 * most 4 MiB (each in a 1 KiB block of the kernel's BPF allocator).
 */
#define MAX_UNIT_HISTS 4096

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MAX_UNIT_HISTS);
	__type(key, struct unit_hist_key);
	__type(value, struct hist);
} unit_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_IDS);
	__type(key, enum stat_id);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * The traced window of a duty cycle (dbiolat serve), bpf_ktime_get_ns
 * times set by Go: traced_since_ns once the hooks are all attached again
 * after a pause, traced_until_ns before it detaches them (0 while
 * attached). Both 0 when tracing never paused. The hooks come and go one
 * by one (a second to come off), so the window, not the hooks, says what
 * was traced: a span that began before it or ended after it (a query, a
 * syscall, a block request, a sleep) was not seen whole, so it is left
 * out and counted, never measured as if it had been. resync_ns is set
 * before the hooks come back: a connection's protocol state that follows
 * an older value missed what went by and starts over (pgwire_task,
 * mysql_resync).
 */
volatile __u64 traced_since_ns;
volatile __u64 traced_until_ns;
volatile __u64 resync_ns;

static __always_inline int crossed_pause(__u64 start_ns, __u64 end_ns)
{
	return start_ns < traced_since_ns || (traced_until_ns && end_ns > traced_until_ns);
}

static __always_inline void stat_add(enum stat_id id, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &id);

	if (v)
		*v += n; /* per-CPU: no atomics needed */
}

static __always_inline void stat_inc(enum stat_id id)
{
	stat_add(id, 1);
}

/* n values whose sum is total, each at their mean: n statements ended together. */
static __always_inline void hist_add_n(enum hist_id id, __u64 total, __u32 n)
{
	struct hist *h = bpf_map_lookup_elem(&hists, &id);
	__u32 slot;

	if (!h || !n)
		return;
	slot = log2_slot(total / n);
	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	h->slots[slot] += n;
	h->sum += total;
}

static __always_inline void hist_add(enum hist_id id, __u64 v)
{
	hist_add_n(id, v, 1);
}

/* A value into a histogram other CPUs write too. */
static __always_inline void hist_add_shared(struct hist *h, __u64 v)
{
	__u32 slot = log2_slot(v);

	if (slot >= HIST_SLOTS)
		slot = HIST_SLOTS - 1;
	__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum, v);
}

/*
 * The histogram under key in a hash map of them, created empty if new;
 * NULL, counted in full, when the map has no room.
 */
static __always_inline struct hist *hist_of(void *map, const void *key, enum stat_id full)
{
	struct hist *h = bpf_map_lookup_elem(map, key);

	if (!h) {
		static const struct hist zero;

		bpf_map_update_elem(map, key, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(map, key);
		if (!h)
			stat_inc(full);
	}
	return h;
}

/* A value into the host's histogram and its unit's (unit 0: none). */
static __always_inline void unit_hist_add(__u32 unit, enum hist_id id, __u64 v)
{
	struct unit_hist_key key = {.unit = unit, .id = id};
	struct hist *h;

	hist_add(id, v);
	if (unit && (h = hist_of(&unit_hists, &key, STAT_UNIT_HISTS_FULL)))
		hist_add_shared(h, v);
}

/* n operations. For counters only their own thread writes: no atomics needed. */
static __always_inline void acct_addn_own(struct io_acct *a, __u64 n, __u64 bytes, __u64 ns)
{
	a->count += n;
	a->bytes += bytes;
	a->ns += ns;
}

static __always_inline void acct_addn(struct io_acct *a, __u64 n, __u64 bytes, __u64 ns)
{
	__sync_fetch_and_add(&a->count, n);
	__sync_fetch_and_add(&a->bytes, bytes);
	__sync_fetch_and_add(&a->ns, ns);
}

static __always_inline void acct_add_own(struct io_acct *a, __u64 bytes, __u64 ns)
{
	acct_addn_own(a, 1, bytes, ns);
}

static __always_inline void acct_add(struct io_acct *a, __u64 bytes, __u64 ns)
{
	acct_addn(a, 1, bytes, ns);
}

#endif /* COUNTERS_BPF_H */
