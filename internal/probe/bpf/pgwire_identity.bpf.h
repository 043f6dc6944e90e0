/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * serve: the identities PostgreSQL's statements are counted under in the
 * kernel (statements.bpf.h), read from the captured messages of their
 * round trip: a statement run alone (pgwire_identity), the statements of
 * a walked round trip a record holds (pgwire_walk_identity).
 */
#ifndef PGWIRE_IDENTITY_BPF_H
#define PGWIRE_IDENTITY_BPF_H

#include "sock.bpf.h"
#include "statements.bpf.h"
#include "pgwire.bpf.h"

/*
 * serve: the identity of the statement a round trip ran alone: its query
 * id, else its text (a simple Query's, a Parse's), else the prepared
 * statement a Bind of the unnamed portal names, in this backend.
 */
static __always_inline void pgwire_identity(struct wire *w, struct stmt_key *k)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, off = w->text_off, end;
	struct capture *t;

	if (stmt_query_id(k, w))
		return;
	t = bpf_task_storage_get(&captures, bpf_get_current_task_btf(), 0, 0);
	if (!t || off + 7 > t->len)
		return;
	end = off + 1 + be32_at(t->buf, off + 1);
	switch (t->buf[off & TEXT_MASK]) {
	case 'Q':
		k->queryid = stmt_text(t, off + 5, end, 0);
		k->kind = STMT_TEXT;
		break;
	case 'P': /* past its statement's name */
		k->queryid = stmt_text(t, off + 5, end, 1);
		k->kind = STMT_TEXT;
		break;
	case 'B':
		if (!t->buf[(off + 5) & TEXT_MASK] && t->buf[(off + 6) & TEXT_MASK])
			stmt_prepared(k, tgid, stmt_text(t, off + 6, end, 0));
		break;
	}
}

/* A hash of the bytes [start, end) of t, eight at a time from start (the
 * same bytes anywhere hash alike): a Parse's, whose text carries
 * parameters, not literals (so its bytes name it), at a tenth of the cost
 * of stmt_text's walk. */
struct word_hash {
	struct capture *t;
	__u32 off, end; /* the bytes not hashed yet */
	__u64 h;
};

static long word_hash_step(__u32 i, void *ctx)
{
	struct word_hash *s = ctx;
	__u32 at = s->off & TEXT_MASK;
	__u64 v;

	if (s->off >= s->end || at > QUERY_TEXT_MAX - 8) /* (a capture's last bytes: its Parse was cut) */
		return 1;
	__builtin_memcpy(&v, &s->t->buf[at], sizeof(v));
	if (s->end - s->off < 8) /* little-endian: the bytes past end are the high ones */
		v &= (1ULL << (8 * ((s->end - s->off) & 7))) - 1;
	s->h = (s->h ^ v) * FNV_PRIME;
	s->off += 8;
	return 0;
}

static __always_inline __u64 word_hash(struct capture *t, __u32 start, __u32 end)
{
	struct word_hash s = { .t = t, .off = start, .end = end, .h = FNV_OFFSET };

	bpf_loop(QUERY_TEXT_MAX / 8, word_hash_step, &s, 0);
	return (s.h ^ (end - start)) * FNV_PRIME | 1;
}

/*
 * serve: the identity of a record of a walked round trip (a pipeline, a
 * batch, a Query of several), so that the kernel counts its statements as
 * it counts a statement run alone, not Go from a record each. Its
 * statements, the round trip's first..first + n - 1, are found in the
 * captured messages by their Executes. Go names a record by its
 * statements' distinct texts (session.pipelines), so statements of one
 * text are that statement's own identity (a hash of the bytes of the
 * Parse before them: a text with parameters, not literals; or the prepared
 * statement their Bind names, as pgwire_identity has it), however many;
 * statements of several texts are a hash of theirs in order
 * (STMT_ROUND_TRIP), which Go names from its first record. A Query of
 * several statements, ended in one record, is its text's hash. Not for
 * statements whose Executes were not captured (a long pipeline's, read in
 * parts: those of the captured part are), or that bind an unnamed
 * statement prepared before the capture, prepare a named one (Go learns
 * those from records), bind a named portal, suspend, resume or fail. A
 * global function: the verifier checks it once.
 */
struct walk_identity {
	struct capture *t;
	__u32 off, end;    /* the captured messages not walked yet */
	__u32 at;          /* the round trip's statement the next Execute runs */
	__u32 first, last; /* the record's statements: first..last - 1 */
	__u64 unnamed;     /* the unnamed statement's hash, 0: not prepared in the capture */
	__u64 bound;       /* the statement the last Bind bound (0: unknown)... */
	__u8 bound_named;  /* ...by its prepared name */
	__u64 one;         /* the record's first statement's identity */
	__u64 h;           /* the record's statements' identities, in order */
	__u32 found;       /* of the record's statements, those seen */
	__u8 mixed;        /* they are not all the first's */
	__u8 named;        /* one of the record's statements is */
	__u8 query;        /* a Query of several, whose statements end in this record alone */
	__u8 lost;         /* a statement of the record's could not be named */
};

static long walk_identity_step(__u32 i, void *ctx)
{
	struct walk_identity *s = ctx;
	__u32 off = s->off, len, end;
	char type;

	if (off >= s->end || s->end - off < 5)
		return 1;
	type = s->t->buf[off & TEXT_MASK];
	len = be32_at(s->t->buf, off + 1);
	if (len < 4 || len > s->end - off - 1)
		return 1;
	end = off + 1 + len;
	s->off = end;
	switch (type) {
	case 'P': /* of the unnamed statement (a named one's round trip is excluded) */
		s->unnamed = word_hash(s->t, off + 5, end);
		break;
	case 'B': /* into the unnamed portal (a named one's round trip is excluded) */
		s->bound_named = len > 5 && s->t->buf[(off + 6) & TEXT_MASK];
		s->bound = s->bound_named ? stmt_text(s->t, off + 6, end, 0) : s->unnamed;
		break;
	case 'E':
		if (s->at >= s->first && s->at < s->last) {
			if (!s->bound) {
				s->lost = 1;
				return 1;
			}
			if (!s->found)
				s->one = s->bound;
			s->mixed |= s->bound != s->one;
			s->h = (s->h ^ s->bound) * FNV_PRIME;
			s->named |= s->bound_named;
			s->found++;
		}
		s->at++;
		break;
	case 'Q':
		if (!s->query) {
			s->lost = 1;
			return 1;
		}
		s->h = stmt_text(s->t, off + 5, end, 0);
		s->found = s->last - s->first;
		s->mixed = 1; /* named apart from the same text run alone */
		return 1;
	case 'S':
		return 1;
	}
	return 0;
}

#define WALK_IDENTITY_MESSAGES 256 /* messages walked at most: a longer capture's later statements go as records */

__noinline int pgwire_walk_identity(struct wire *w, struct stmt_key *k, __u32 n)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, query_id_off;
	struct walk_identity s = { .h = FNV_OFFSET };

	if (!w || !k || !n || w->failed || w->text_first > w->recorded ||
	    (w->flags & (WIRE_IN_LOST | WIRE_SUSPENDED | WIRE_RESUME | WIRE_NAMED_PARSE | WIRE_NAMED_PORTAL)))
		return 0;
	s.t = bpf_task_storage_get(&captures, bpf_get_current_task_btf(), 0, 0);
	if (!s.t)
		return 0;
	s.off = w->text_off;
	s.end = w->next_off ? w->next_off : s.t->len;
	s.at = w->text_first;
	s.first = w->recorded;
	s.last = s.first + n;
	s.query = w->state == WIRE_IDLE && !w->recorded && !w->text_first && n > 1;
	bpf_loop(WALK_IDENTITY_MESSAGES, walk_identity_step, &s, 0);
	if (s.lost || s.found != n)
		return 0;
	stmt_labels(k, w, &query_id_off);
	if (s.mixed) {
		k->queryid = s.h;
		if (s.named) /* the statements' names are the backend's */
			k->queryid = (k->queryid ^ tgid) * FNV_PRIME;
		k->queryid |= 1;
		k->kind = STMT_ROUND_TRIP;
	} else if (s.named) {
		stmt_prepared(k, tgid, s.one);
	} else {
		k->queryid = s.one;
		k->kind = STMT_TEXT;
	}
	/* No later statement in the capture: Go needs no record of it (as for
	 * a round trip of one statement counted here, a later round trip that
	 * binds the unnamed statement it prepared is not named by its text). */
	if (s.at <= s.last)
		w->text_sent = 1;
	return 1;
}

#endif /* PGWIRE_IDENTITY_BPF_H */
