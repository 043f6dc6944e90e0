/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What of a PostgreSQL round trip's request goes to user space: the
 * captured messages with each record (pgwire_submit), and, for a walked
 * round trip (a pipeline), each later read's parts of a capture's size
 * (PostgreSQL reads up to 8 KiB, a capture holds 4), each after a record
 * that teaches Go the part before, so that Go reads every message whole
 * and names every statement by its place.
 */
#ifndef PGWIRE_CAPTURE_BPF_H
#define PGWIRE_CAPTURE_BPF_H

#include "sock.bpf.h"
#include "pgwire.bpf.h"
#include "pooler.bpf.h"

/*
 * A walked round trip's request, a read of it: counts its Executes (the
 * first read's too, beyond what was captured), so that the text of a later
 * read can say which statement it begins with; mw says where its first
 * message and the next round trip start. 0 if it lost its place (then no
 * later read of the round trip is captured).
 */
static __always_inline int pgwire_request_walk(struct wire *w, struct msg_walk *mw, void *buf, int n)
{
	mw->request = 1;
	if (!buf || !msg_walk(&w->in, mw, (__u64)buf, n)) {
		w->flags |= WIRE_IN_LOST;
		stat_inc(STAT_WIRE_UNCAPTURED);
		return 0;
	}
	w->execs += mw->done;
	w->flags |= mw->portal_flags;
	return 1;
}

/* The record goes out with the round trip's messages, as captured. */
static __always_inline void pgwire_submit(struct query_event *e, struct wire *w, struct capture *t)
{
	__u32 off = w->text_off & TEXT_MASK, n = 0;

	e->text_kind = TEXT_PG_WIRE;
	e->text_skip = 0;
	if (t && t->part) { /* sent whole: its first bytes end the message the part before ended in */
		e->text_kind = TEXT_PG_WIRE_PART;
		e->text_skip = w->text_off < t->len ? w->text_off : t->len;
		off = 0;
	}
	if (t && t->len > off)
		n = capture_bound(t->len - off);
	if (n && bpf_probe_read_kernel(e->text, n, t->buf + off))
		n = 0;
	e->text_at = t ? t->at + off : 0;
	e->text_first = w->text_first;
	pooled_record(e);
	query_submit(e, n, w->flags & WIRE_TRUNCATED);
	w->text_sent = 1;
}

/*
 * The captured bytes are about to be replaced before any record carried
 * them: a record that only teaches Go what they hold (the statements they
 * prepare, the texts of the statements they run, by their place in the
 * round trip) goes out with them, now.
 */
static __always_inline void pgwire_teach(struct task_struct *task, struct wire *w, struct capture *t)
{
	struct thread_state *ts = thread_current();
	struct query_event *e;
	__u32 zero = 0;
	__u64 now;

	if (w->text_sent || !ts || !(e = bpf_map_lookup_elem(&query_scratch, &zero)))
		return;
	now = bpf_ktime_get_ns();
	__builtin_memset(&e->acct, 0, sizeof(e->acct));
	__builtin_memset(e->waits, 0, sizeof(e->waits));
	query_fill(e, ts, now, now, EMIT_STATEMENT);
	pgwire_submit(e, w, t);
}

/*
 * A part of a walked round trip's request: the bytes of a read from `from`
 * on, as many as a capture holds, replace the captured ones (after a record
 * that teaches Go those: pgwire_teach), so that the records of the
 * statements they hold have their text (Go keeps the earlier parts' texts:
 * session.pipelines). Sent whole: the message that began in the part
 * before ends in it, and Go joins the two. read_at: where the read starts
 * in the round trip's bytes; start: where its first message starting at or
 * after `from` starts, first: the Executes before that one; next_at: where
 * the next round trip starts in the read (0: not in it).
 */
static __always_inline void pgwire_part(struct task_struct *task, struct wire *w, struct capture *t, const char *buf,
					__u32 from, __u32 ret, __u32 read_at, __u64 start, __u32 first, __u32 next_at)
{
	__u32 n = capture_bound(ret - from);

	pgwire_teach(task, w, t);
	if (bpf_probe_read_user(t->buf, n, buf + from)) {
		stat_inc(STAT_WIRE_UNREADABLE);
		t->len = 0;
		return;
	}
	t->len = n;
	t->part = 1;
	t->at = read_at + from;
	w->text_sent = 0;
	w->text_off = start - from < n ? start - from : n;
	w->text_first = first;
	w->next_off = next_at > from && next_at - from < n ? next_at - from : 0;
	w->flags &= ~(WIRE_NAMED_PARSE | WIRE_TRUNCATED);
}

/*
 * The rest of a walked round trip's read, past its first part (at `from`):
 * PostgreSQL reads up to 8 KiB at a time, a capture holds 4, so a read has
 * at most two parts. Taken while the round trip goes on past the first.
 */
static __always_inline void pgwire_rest(struct task_struct *task, struct wire *w, struct capture *t, const char *buf,
					__u32 from, __u32 ret, __u32 read_at, __u32 before, struct msg_walk *mw)
{
	if (ret <= from)
		return;
	if (mw->next_at && mw->next_at <= from) { /* the next round trip began in the first part: its
						     * rest is not captured (pgwire_end begins it there) */
		stat_inc(STAT_WIRE_UNCAPTURED);
		w->flags |= WIRE_TRUNCATED;
		return;
	}
	pgwire_part(task, w, t, buf, from, ret, read_at, mw->rest_at ? mw->rest_at : ret, before + mw->execs_rest,
		    mw->next_at);
	if (mw->named_parse)
		w->flags |= WIRE_NAMED_PARSE;
	if (ret - from > QUERY_TEXT_MAX) { /* more than two parts: not PostgreSQL's reads */
		stat_inc(STAT_WIRE_UNCAPTURED);
		w->flags |= WIRE_TRUNCATED;
	}
}

/*
 * A later read of a walked round trip: the server is done with every
 * message before it, and what it runs next is in it. Its parts (those that
 * hold a message's start, and the rest of one that did) are captured in
 * turn.
 */
static __always_inline void pgwire_recapture(struct task_struct *task, struct wire *w, void *buf, int ret)
{
	__u32 before = w->execs, read_at;
	struct msg_walk mw = {};
	struct capture *t = bpf_task_storage_get(&captures, task, 0, 0);

	if (!t)
		return;
	read_at = t->walked;
	t->walked += ret;
	if (!pgwire_request_walk(w, &mw, buf, ret))
		return;
	if (mw.first_at < QUERY_TEXT_MAX && mw.first_at < (__u32)ret) { /* a message begins in the first part */
		pgwire_part(task, w, t, buf, 0, ret, read_at, mw.first_at, before + mw.execs_first, mw.next_at);
		if (mw.named_parse)
			w->flags |= WIRE_NAMED_PARSE;
		pgwire_rest(task, w, t, buf, QUERY_TEXT_MAX, ret, read_at, before, &mw);
	} else if (mw.rest_at && mw.rest_at < (__u32)ret) { /* only in the second */
		pgwire_rest(task, w, t, buf, QUERY_TEXT_MAX, ret, read_at, before, &mw);
	}
}

#endif /* PGWIRE_CAPTURE_BPF_H */
