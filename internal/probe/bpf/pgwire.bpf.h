/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What do PostgreSQL's protocol messages hold? The message walkers of
 * pgwire.bpf.c: what a round trip's request does (pgwire_walk), whether a
 * simple Query holds a second statement, the statements a reply ends and
 * the Executes a request holds, socket call by socket call.
 */
#ifndef PGWIRE_BPF_H
#define PGWIRE_BPF_H

#include "sock.bpf.h"

static __always_inline __u32 be32_at(const char *b, __u32 off)
{
	return (__u32)(__u8)b[off & TEXT_MASK] << 24 | (__u32)(__u8)b[(off + 1) & TEXT_MASK] << 16 |
	       (__u32)(__u8)b[(off + 2) & TEXT_MASK] << 8 | (__u32)(__u8)b[(off + 3) & TEXT_MASK];
}

/*
 * Does a simple Query's text at [off, end) hold another statement: a
 * semicolon before the run of semicolons, white space and NULs it ends
 * with? (A semicolon in a literal or a comment only costs a walk.) The run
 * is taken off a byte at a time from the end (most texts end in ";\0"),
 * the rest looked at eight bytes at a time for a semicolon, its last eight
 * overlapping the word before.
 */
struct semi_scan {
	struct capture *t;
	__u32 start, off, end;
	__u8 found;
};

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static __always_inline long semi_word_inline(struct semi_scan *s)
{
	__u64 v, x, keep = ~0ULL;
	__u32 at = s->off;

	if (s->off >= s->end)
		return 1;
	if (s->end - s->off < 8) { /* the last bytes */
		if (s->end - s->start >= 8)
			at = s->end - 8;
		else /* a text shorter than a word */
			keep = (1ULL << (8 * (s->end - s->off))) - 1;
	}
	barrier_var(at);
	if (at > QUERY_TEXT_MAX - 8) { /* not in the capture: walk */
		s->found = 1;
		return 1;
	}
	__builtin_memcpy(&v, &s->t->buf[at], sizeof(v));
	x = (v ^ (';' * ONES)) | ~keep;
	if ((x - ONES) & ~x & HIGHS) { /* a zero byte: a semicolon */
		s->found = 1;
		return 1;
	}
	s->off += 8;
	return 0;
}

static long semi_word(__u32 i, void *ctx)
{
	return semi_word_inline(ctx);
}

static __always_inline int text_trailer(char c)
{
	return c == ';' || !c || c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* Words of a text looked at in line before bpf_loop takes over, and
 * bytes of its trailing run taken off: most queries are short, and a
 * callback per step costs more than the step. */
#define SEMI_INLINE_WORDS 16
#define SEMI_TRAILER 16

static __always_inline int query_has_more(struct capture *t, __u32 off, __u32 end)
{
	struct semi_scan scan = { .t = t, .start = off, .off = off };
	int i;

	for (i = 0; i < SEMI_TRAILER && end > off && text_trailer(t->buf[(end - 1) & TEXT_MASK]); i++)
		end--;
	if (i == SEMI_TRAILER) /* a long run: its replies tell */
		return 1;
	scan.end = end;
	for (i = 0; i < SEMI_INLINE_WORDS; i++)
		if (semi_word_inline(&scan))
			return scan.found;
	bpf_loop(QUERY_TEXT_MAX / 8, semi_word, &scan, 0);
	return scan.found;
}

/*
 * Walking a message stream, a socket call's bytes at a time: a reply's, to
 * count the statements it ends, or a walked round trip's request, to count
 * its Executes (which statement the captured text begins with). A call
 * may end inside a message, or inside a header: where it stopped is
 * carried to the next call (struct msg_carry). Each header is read from
 * the process (an offset into a copy would make the verifier track every
 * step).
 */
#define MSG_MAX_WALK 4096 /* messages walked per call: 8 KiB hold at most 1,639 */

struct msg_walk {
	const char *buf;    /* the call's bytes (user memory) */
	__u64 off, n;       /* where the next message starts; bytes in the call */
	__u64 first_at;     /* where the first message that starts in the call starts (n or more: none) */
	__u32 execs_first;  /* request: the Executes before it */
	__u32 next_at;      /* request: where the next round trip starts (past its Sync), 0: not in the call */
	__u64 rest_at;      /* request: where the first message that starts past a capture's length starts (0: none) */
	__u32 execs_rest;   /* request: the Executes before it */
	__u32 done, failed; /* reply: statements ended, and of them by an error; request: Executes */
	__u32 opened;       /* reply: fresh executions that suspended (a BindComplete before their PortalSuspended) */
	__u32 resumed;      /* reply: statements ended with no BindComplete of their own, when resumable */
	__u8 request;       /* the frontend's messages, not the backend's */
	__u8 ready, suspended, lost;
	__u8 named_parse;   /* request: a Parse of a named statement */
	__u8 bound;         /* reply: a BindComplete since the last statement's end */
	__u8 resumable;     /* reply: its request resumes a portal (WIRE_RESUME) */
	__u8 status;        /* reply: the ReadyForQuery's transaction status ('I', 'T', 'E'; 0: not seen) */
	__u16 portal_flags; /* request: what it does to portals (WIRE_NAMED_PORTAL, WIRE_UNNAMED, WIRE_CLOSE_PORTAL) */
};

/*
 * A message of type and length (without the type byte) at w->off, its
 * body's first byte next (0 if not known). 1 stops the walk.
 */
static __always_inline long msg_seen(struct msg_walk *w, char type, __u32 len, char next)
{
	if (len < 4 || len > (1U << 30)) {
		w->lost = 1;
		return 1;
	}
	w->off += 1 + len;
	if (w->request) {
		switch (type) {
		case 'E': /* Execute: a statement, unless past the round trip's Sync */
			w->done += !w->next_at;
			break;
		case 'P': /* Parse: a named statement if its name is not empty */
			w->named_parse |= next != 0;
			break;
		case 'B': /* Bind: a named portal if its name is not empty */
			if (!w->next_at)
				w->portal_flags |= next ? WIRE_NAMED_PORTAL : WIRE_UNNAMED;
			break;
		case 'C': /* Close of a portal, not of a statement */
			if (!w->next_at && next == 'P')
				w->portal_flags |= WIRE_CLOSE_PORTAL;
			break;
		case 'Q':
			if (!w->next_at)
				w->portal_flags |= WIRE_UNNAMED;
			/* fallthrough */
		case 'S':
		case 'F':
			if (!w->next_at && w->off < w->n)
				w->next_at = w->off;
			break;
		}
		if (!w->rest_at && w->off >= QUERY_TEXT_MAX) { /* where the read's second part begins */
			w->rest_at = w->off;
			w->execs_rest = w->done;
		}
		return 0;
	}
	switch (type) {
	case '2': /* BindComplete: a fresh portal, whose rows or end come next */
		w->bound = 1;
		break;
	case 'E': /* ErrorResponse: the statement failed (in a pipeline, the rest to the Sync is skipped) */
		w->failed++;
		/* fallthrough */
	case 'C': /* CommandComplete */
	case 'I': /* EmptyQueryResponse */
	case 'V': /* FunctionCallResponse */
		w->done++;
		/* no Bind of its own: a suspended portal resumed, completed */
		w->resumed += w->resumable && !w->bound;
		w->bound = 0;
		break;
	case 's': /* PortalSuspended: the statement goes on at the next Execute */
		w->suspended = 1;
		w->opened += w->bound; /* a fresh portal's first part */
		w->bound = 0;
		break;
	case 'Z': /* ReadyForQuery: the round trip is over; its body, the transaction status */
		w->ready = 1;
		w->status = next;
		return 1;
	}
	return 0;
}

static long msg_step(__u32 i, void *ctx)
{
	struct msg_walk *w = ctx;
	char m[6] = {};

	if (w->off + 5 > w->n) /* the end, or a header cut by it */
		return 1;
	/* the header, and the body's first byte if the call holds it (constant
	 * sizes: a computed one would make the verifier track every step) */
	if (w->off + 6 <= w->n ? bpf_probe_read_user(m, 6, w->buf + w->off) : bpf_probe_read_user(m, 5, w->buf + w->off)) {
		w->lost = 1;
		return 1;
	}
	return msg_seen(w, m[0], be32_at(m, 1), m[5]);
}

/*
 * Walks the n bytes of a socket call from buf, from where the last call
 * left the stream (c), and leaves c where this one ends. 0 if the walk
 * lost its place (a message that cannot be one, more messages than
 * walked, bytes that cannot be read). A global function: the verifier
 * checks it once, not in every caller's state.
 */
__noinline int msg_walk(struct msg_carry *c, struct msg_walk *walk, __u64 buf, __u32 n)
{
	struct msg_walk w; /* on the stack, where bpf_loop wants its context */
	__u32 need, have;
	int ok = 0;

	if (!c || !walk)
		return 0;
	w = *walk;
	have = c->hdr_len & 7;
	w.buf = (const char *)buf;
	w.n = n;
	w.bound = c->bound;
	if (have) { /* the last call ended inside a header: its rest begins this one */
		__u64 saved, rest = 0, hdr;

		have = have > 4 ? 4 : have;
		need = 5 - have;
		if (need > n || bpf_probe_read_user(&rest, need & 7, (const void *)buf))
			goto out;
		__builtin_memcpy(&saved, c->hdr, sizeof(saved));
		/* little-endian: the saved bytes, then the new ones */
		hdr = (saved & ((1ULL << (8 * have)) - 1)) | rest << (8 * have);
		c->hdr_len = 0;
		w.off = (__u64)need - 5; /* the message began before this call (wraps: + its length) */
		if (msg_seen(&w, hdr & 0xff, __builtin_bswap32(hdr >> 8), 0) && !w.ready)
			goto out;
	} else {
		w.off = c->skip; /* the rest of a message begun before */
	}
	w.first_at = w.off; /* the first message that starts in the call */
	w.execs_first = w.done;
	if (w.request && !w.rest_at && w.off >= QUERY_TEXT_MAX) {
		w.rest_at = w.off;
		w.execs_rest = w.done;
	}
	if (!w.ready && bpf_loop(MSG_MAX_WALK, msg_step, &w, 0) == MSG_MAX_WALK && w.off + 5 <= n)
		w.lost = 1;
	if (w.lost)
		goto out;
	c->skip = w.off > n ? w.off - n : 0;
	if (!w.ready && w.off < n) { /* a header cut by the end of the call: its 1 to 4 bytes */
		need = n - w.off;
		/* a byte at a time: a computed size would make the verifier track
		 * the walk's every step to check it */
		for (int i = 0; i < 4; i++)
			if (i < need && bpf_probe_read_user(&c->hdr[i], 1, (const void *)(buf + w.off + i)))
				goto out;
		c->hdr_len = need;
	}
	c->bound = w.bound;
	ok = 1;
out:
	*walk = w;
	return ok;
}

#define WIRE_MAX_MSGS 16 /* messages walked per round trip */

/*
 * Walks the round trip's messages from w->text_off: notes whether it runs
 * a query, whether it may run several (then its replies are walked),
 * whether it prepares a named statement or binds a named portal, and where
 * the next round trip starts when the client sent several at once. A Sync,
 * a simple Query or a FunctionCall is the last message of a round trip.
 * A global function: the verifier checks it once, not in every caller.
 */
__noinline int pgwire_walk(struct capture *t, struct wire *w)
{
	__u32 off, len, i;

	if (!t || !w)
		return 0;
	off = w->text_off;
	w->next_off = 0;
	for (i = 0; i < WIRE_MAX_MSGS; i++) {
		if (off + 5 > t->len) {
			w->flags |= WIRE_OPEN;
			break;
		}
		len = be32_at(t->buf, off + 1);
		if (len < 4 || len > (1U << 30)) { /* not a message: count it as a query */
			w->flags |= WIRE_EXEC;
			return 0;
		}
		switch (t->buf[off & TEXT_MASK]) {
		case 'Q':
			w->flags |= WIRE_UNNAMED; /* its statements run in the unnamed portal */
			if (off + 1 + len > t->len ||
			    query_has_more(t, off + 5, off + 1 + len))
				w->flags |= WIRE_WALK;
			/* fallthrough */
		case 'F':
			w->flags |= WIRE_EXEC;
			/* fallthrough */
		case 'S':
			off += 1 + len;
			if (off < t->len)
				w->next_off = off;
			goto out;
		case 'E': /* a second Execute: the replies tell how many ran (a flag, not a
			   * count: each count would be a path of its own to the verifier) */
			if (w->flags & WIRE_EXEC)
				w->flags |= WIRE_WALK;
			if (!(w->flags & (WIRE_NAMED_PORTAL | WIRE_UNNAMED))) /* no Bind before it */
				w->flags |= WIRE_RESUME;
			w->flags |= WIRE_EXEC;
			break;
		case 'P':
			if (off + 5 < t->len && t->buf[(off + 5) & TEXT_MASK])
				w->flags |= WIRE_NAMED_PARSE;
			break;
		case 'B':
			if (off + 5 < t->len && t->buf[(off + 5) & TEXT_MASK])
				w->flags |= WIRE_NAMED_PORTAL;
			else
				w->flags |= WIRE_UNNAMED;
			break;
		case 'C': /* Close of a portal ('P'), not of a statement ('S') */
			if (off + 5 < t->len && t->buf[(off + 5) & TEXT_MASK] == 'P')
				w->flags |= WIRE_CLOSE_PORTAL;
			break;
		}
		off += 1 + len;
	}
	if (i == WIRE_MAX_MSGS)
		w->flags |= WIRE_EXEC | WIRE_OPEN; /* more messages than we walk: assume it runs several */
out:
	/* More than we saw: its replies tell how many ran. */
	if (w->flags & WIRE_OPEN)
		w->flags |= WIRE_WALK;
	return 0;
}

/* ReadyForQuery: 'Z', length 5, transaction status. */
static __always_inline int ready_for_query(const char *m)
{
	return m[0] == 'Z' && m[1] == 0 && m[2] == 0 && m[3] == 0 && m[4] == 5 &&
	       (m[5] == 'I' || m[5] == 'T' || m[5] == 'E');
}

/*
 * Did the transaction that the ReadyForQuery ending at zend in buf says is
 * over ('I') commit? Not when the message before it is an ErrorResponse
 * (its list of fields ends in two NULs; a NoticeResponse there, which ends
 * the same, is taken for one) or a ROLLBACK's CommandComplete (what COMMIT
 * answers in a failed transaction, too). A message before it that an
 * earlier send carried is taken for a commit's.
 */
static __always_inline int tx_committed(const char *buf, __u64 zend)
{
	char m[16] = {}; /* the bytes before the ReadyForQuery */
	__u64 word;

	if (zend < 8)
		return 1;
	if (zend >= 22 ? bpf_probe_read_user(m, 16, buf + zend - 22) : bpf_probe_read_user(m + 14, 2, buf + zend - 8))
		return 1;
	if (!m[14] && !m[15])
		return 0;
	__builtin_memcpy(&word, m + 7, sizeof(word));
	/* 'C', length 13, "ROLLBACK" (little-endian: its first letter lowest) */
	return !(m[2] == 'C' && m[6] == 13 && word == 0x4b4341424c4c4f52ULL);
}

/* The last bytes of a reply, where its ReadyForQuery is: per CPU, as a
 * send's length places it anywhere in them. Twice the bytes read, so that
 * an offset masked to them plus a header's few bytes stays inside. */
#define REPLY_TAIL 64

struct reply_tail {
	char b[2 * REPLY_TAIL];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct reply_tail);
} reply_tails SEC(".maps");

/*
 * Did the reply whose ReadyForQuery starts at z in b report no parameter
 * change? PostgreSQL (14 on) sends a ParameterStatus for each reported
 * parameter that changed (application_name among them) right before its
 * ReadyForQuery (ReportChangedGUCOptions). So none was sent if the message
 * ending at z is one without a body (PortalSuspended, BindComplete...) or
 * a CommandComplete: 'C', its length (below 256), its tag and the tag's
 * NUL at z - 1, found from that NUL back (the first zero byte before the
 * tag is the third of the length's four).
 * A ParameterStatus there ends in two strings ("name\0value\0"), which
 * neither can be taken for. 0 when not sure (an error, a notice, a tag
 * longer than the tail): the caller reads what may have changed.
 */
static __always_inline int reply_quiet(const char *b, __u32 z)
{
	__u32 i, c;

	if (z < 5 || z > REPLY_TAIL - 6)
		return 0;
	if (b[z - 1] == 4 && !b[z - 2] && !b[z - 3] && !b[z - 4]) /* a message of no body */
		return b[z - 5] != 'S';
	if (b[z - 1]) /* not a string's end */
		return 0;
	for (i = 2; i < REPLY_TAIL - 6; i++) /* back over the tag and the length's last byte */
		if (i > z || !b[(z - i) & (REPLY_TAIL - 1)])
			break;
	if (i > z || z - i < 3)
		return 0;
	c = (z - i - 3) & (REPLY_TAIL - 1); /* where the CommandComplete would start */
	return b[c] == 'C' && !b[(c + 1) & (REPLY_TAIL - 1)] && !b[(c + 2) & (REPLY_TAIL - 1)] &&
	       (__u8)b[(c + 4) & (REPLY_TAIL - 1)] == z - c - 1;
}

/* PortalSuspended: 's', length 4. */
static __always_inline int portal_suspended(const char *m)
{
	return m[0] == 's' && m[1] == 0 && m[2] == 0 && m[3] == 0 && m[4] == 4;
}

#endif /* PGWIRE_BPF_H */
