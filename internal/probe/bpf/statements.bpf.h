/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every query counted in the kernel by its statement's identity (serve,
 * top), so that tracing all the time costs about what the hooks cost: no
 * record per query, no text read, normalized and fingerprinted in user
 * space. A query goes out as a record only when chosen (query.bpf.h): over
 * a threshold, drawn for a sample, the first of its identity on a CPU (it
 * names the identity for Go), or one no identity counts (Go counts it).
 */
#ifndef STATEMENTS_BPF_H
#define STATEMENTS_BPF_H

#include "state.bpf.h"
#include "counters.bpf.h"
#include "bits.bpf.h"

/* The hashes of identities (FNV-1a's constants). */
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

/* Set by Go before load. */
/* Count queries by identity here (serve, top); a query no identity counts
 * is then sent as a record, for Go to count. */
const volatile __u8 count_statements = 0;
const volatile __u32 emit_sample = 0;     /* send this share of queries, of 2^32, drawn at random */

/* An entry per identity and CPU (struct stmt_key); Go sizes it, and it
 * is allocated as it fills: most identities run on a few CPUs. Full, a
 * query counts in stmt_overflow (STAT_STMTS_FULL), shown as "other". */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct stmt_key);
	__type(value, struct stmt_totals);
} stmts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stmt_totals);
} stmt_overflow SEC(".maps");

/* A new identity's value, zero: too big for the stack. */
static const struct stmt_totals stmt_zero;

/*
 * Identities Go has no name for (their first record was lost), by the
 * low bits of their query id: the next query of one is sent, and the
 * mark cleared. Another identity sharing the bits is sent once more.
 */
volatile __u8 stmt_ask[STMT_ASK];

/*
 * A hash of the application's name, as query_application reads it, from
 * the variable at at (0: not known). A read of user memory costs more
 * than the rest of a query's count (about 80 ns here, more on a cold
 * line), so the hash is kept in w with the address of the string it was
 * read from (the variable's value), and the string is read again only
 * when that changes: PostgreSQL assigns a new string to the variable at
 * every change (set_string_field: the new one is allocated while the old
 * one lives), so the same address is the same name. Only a string freed
 * and reallocated at the same place between two reads would pass for the
 * old name: two changes without a statement counted between them, where
 * pgwire_begin forgets the hash for the round trips that can hold several
 * (a pipeline, a multi-statement Query); one statement calling
 * set_config() twice remains. Nor is the variable read at all when the
 * round trip's reply reported no parameter change (reply_quiet: a changed
 * application_name is reported before the ReadyForQuery that follows it).
 */
static __always_inline __u32 stmt_application(__u64 at, struct wire *w)
{
	__u64 name = 0, s[APPLICATION_MAX / 8] = {}, h = FNV_OFFSET;
	int i;

	if (w && w->reply_quiet && w->application_ptr) /* no change reported since it was read */
		return w->application;
	if (!at || bpf_probe_read_user(&name, sizeof(name), (void *)at) || !name)
		return 0;
	if (w && w->application_ptr == name)
		return w->application;
	if (bpf_probe_read_user_str(s, sizeof(s), (void *)name) <= 1)
		h = 0;
	else {
		for (i = 0; i < APPLICATION_MAX / 8; i++)
			h = (h ^ s[i]) * FNV_PRIME;
		h = (__u32)(h ^ (h >> 32)) | 1;
	}
	if (w) {
		w->application_ptr = name;
		w->application = h;
	}
	return h;
}

/*
 * PostgreSQL: what a statement of the backend (the current task) is
 * counted under besides its identity, read from its memory: its server,
 * database and application. With w, what does not change in a backend's
 * life (its server, status entry and database, where its query id and
 * application_name are) is resolved into w once: later statements need
 * no lookup of the process. Returns the backend's status entry and where
 * the query id is in it (*query_id_off), 0 if unknown.
 */
static __always_inline __u64 stmt_labels(struct stmt_key *k, struct wire *w, __u32 *query_id_off)
{
	__u32 tgid;
	struct proc_info *pi;
	__u64 entry = 0, app = 0;

	if (w && w->status_entry) {
		k->instance = w->instance;
		k->database = w->database;
		k->application = stmt_application(w->application_at, w);
		*query_id_off = w->query_id_off;
		return w->status_entry;
	}
	tgid = bpf_get_current_pid_tgid() >> 32;
	pi = bpf_map_lookup_elem(&procs, &tgid);
	if (!pi)
		return 0;
	k->instance = pi->instance;
	if (pi->wait_event_ptr && pi->application_off)
		app = pi->wait_event_ptr + pi->application_off;
	k->application = stmt_application(app, w);
	if (!pi->wait_event_ptr || !pi->status_off || !pi->query_id_off || !pi->database_off ||
	    bpf_probe_read_user(&entry, sizeof(entry), (void *)(pi->wait_event_ptr + pi->status_off)) || !entry ||
	    bpf_probe_read_user(&k->database, sizeof(k->database), (void *)(entry + pi->database_off)))
		return 0;
	if (w && k->database) { /* 0 until the backend has connected to its database */
		w->status_entry = entry;
		w->database = k->database;
		w->instance = pi->instance;
		w->query_id_off = pi->query_id_off;
		w->application_at = app;
	}
	*query_id_off = pi->query_id_off;
	return entry;
}

/*
 * The identity of the statement the backend ended last: its query id,
 * with its labels (stmt_labels). 0 when it has none (compute_query_id off,
 * a statement without one, an unknown layout): the caller names it by its
 * text, under the same labels.
 */
static __always_inline int stmt_query_id(struct stmt_key *k, struct wire *w)
{
	__u32 query_id_off = 0;
	__u64 entry = stmt_labels(k, w, &query_id_off);

	if (!entry || bpf_probe_read_user(&k->queryid, sizeof(k->queryid), (void *)(entry + query_id_off)) ||
	    !k->queryid)
		return 0;
	k->kind = STMT_QUERY_ID;
	return 1;
}

/* A prepared statement's identity: its id or name's hash h, in its connection. */
static __always_inline void stmt_prepared(struct stmt_key *k, __u64 conn, __u64 h)
{
	k->queryid = (((conn * FNV_PRIME) ^ h) * FNV_PRIME) | 1; /* not h ^ conn: small ids would collide */
	k->kind = STMT_PREPARED;
}

/*
 * Count n statements of ns together under their identity (one, but for a
 * group of a pipeline's): their boxes, file system and block figures, and
 * n latencies in the slot of their mean, as a record of them would count
 * in Go (hist.AddN). Returns the record's flags:
 * EMIT_COUNTED, and EMIT_FIRST when the entry is new or Go asked. A
 * global function: verified once.
 */
__noinline int stmt_count(struct stmt_key *k, struct query_acct *a, __u64 ns, __u32 n)
{
	struct stmt_totals *s;
	__u32 zero = 0, slot, i;
	int flags = EMIT_COUNTED;

	if (!k || !a || !n)
		return 0;
	k->cpu = bpf_get_smp_processor_id();
	s = bpf_map_lookup_elem(&stmts, k);
	if (!s) {
		if (!bpf_map_update_elem(&stmts, k, &stmt_zero, BPF_NOEXIST))
			flags |= EMIT_FIRST;
		s = bpf_map_lookup_elem(&stmts, k);
	}
	i = k->queryid & (STMT_ASK - 1);
	if (s && stmt_ask[i]) {
		stmt_ask[i] = 0;
		flags |= EMIT_FIRST;
	}
	if (!s) {
		stat_inc(STAT_STMTS_FULL);
		s = bpf_map_lookup_elem(&stmt_overflow, &zero);
		if (!s)
			return 0;
	}
	/* Only this CPU writes this entry, and a socket tracepoint's program
	 * runs with preemption off: plain adds. (A TLS connection's query ends
	 * in a uprobe, which may be preempted: another query of the same
	 * identity ending on this CPU within those nanoseconds could lose an
	 * add.) */
	s->calls += n;
	s->ns += ns;
	for (i = 0; i < BOXES; i++)
		s->box_ns[i] += a->box_ns[i];
	for (i = 0; i < FS_ACCTS; i++) {
		s->fs[i].count += a->fs[i].count;
		s->fs[i].bytes += a->fs[i].bytes;
		s->fs[i].ns += a->fs[i].ns;
	}
	for (i = 0; i < BLK_OPS; i++) {
		s->blk[i].count += a->blk[i].count;
		s->blk[i].bytes += a->blk[i].bytes;
		s->blk[i].ns += a->blk[i].ns;
	}
	s->blk_busy_ns += a->blk_busy_ns;
	s->blk_queue_ns += a->blk_queue_ns;
	s->blk_device_ns += a->blk_device_ns;
	slot = log2_slot(ns / n);
	slot = slot < STMT_SLOT_MIN ? 0 : slot - STMT_SLOT_MIN;
	if (slot >= STMT_SLOTS)
		slot = STMT_SLOTS - 1;
	s->slots[slot] += n;
	return flags;
}

#endif /* STATEMENTS_BPF_H */
