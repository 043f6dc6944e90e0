/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Walking PostgreSQL's protocol messages (wire.bpf.c): whether a simple
 * Query holds a second statement, and the statements a reply ends, sent
 * by sent, a message header read at a time.
 */
#ifndef PGWIRE_BPF_H
#define PGWIRE_BPF_H

#include "sock.bpf.h"

static __always_inline __u32 be32_at(const char *b, __u32 off)
{
	return (__u32)(__u8)b[off & TEXT_MASK] << 24 | (__u32)(__u8)b[(off + 1) & TEXT_MASK] << 16 |
	       (__u32)(__u8)b[(off + 2) & TEXT_MASK] << 8 | (__u32)(__u8)b[(off + 3) & TEXT_MASK];
}

/* Does a simple Query's text from off to end hold another statement
 * after a semicolon? (A semicolon in a literal only costs a walk.) Eight
 * bytes at a time to the first word holding a semicolon, then bytewise:
 * most queries have none, or one at their end. */
struct semi_scan {
	struct wire_text *t;
	__u32 off, end;
	__u8 semicolon, more;
};

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static long semi_word(__u32 i, void *ctx)
{
	struct semi_scan *s = ctx;
	__u64 v, x;

	if (s->off + 8 > s->end)
		return 1;
	__builtin_memcpy(&v, &s->t->buf[s->off & (TEXT_MASK & ~7)], sizeof(v));
	x = v ^ (';' * ONES);
	if ((x - ONES) & ~x & HIGHS) /* a zero byte: a semicolon */
		return 1;
	s->off += 8;
	return 0;
}

static long semi_step(__u32 i, void *ctx)
{
	struct semi_scan *s = ctx;
	char c;

	if (s->off >= s->end)
		return 1;
	c = s->t->buf[s->off++ & TEXT_MASK];
	if (c == ';')
		s->semicolon = 1;
	else if (s->semicolon && c && c != ' ' && c != '\n' && c != '\t' && c != '\r')
		s->more = 1;
	return s->more ? 1 : 0;
}

/* Does the simple Query text at [off, end) of t hold a second statement? */
static __always_inline int query_has_more(struct wire_text *t, __u32 off, __u32 end)
{
	/* aligned: the header's bytes before the text are no semicolon's */
	struct semi_scan scan = { .t = t, .off = off & ~7, .end = end };

	bpf_loop(QUERY_TEXT_MAX / 8, semi_word, &scan, 0);
	if (scan.off < off)
		scan.off = off;
	bpf_loop(QUERY_TEXT_MAX, semi_step, &scan, 0);
	return scan.more;
}

/*
 * Walking a reply: the backend's messages in the bytes of one send, from
 * where the last send left off, a header read from the process at a time
 * (an offset into a copy would make the verifier track every step).
 */
#define REPLY_MAX_MSGS 4096 /* messages walked per send: an 8 KiB send holds at most 1,639 */

struct reply_walk {
	const char *buf;    /* the bytes sent (user memory) */
	__u64 off, n;       /* where the next message starts; bytes sent */
	__u32 done, failed; /* statements ended, and of them by an error */
	__u8 ready, suspended, lost;
};

/* The message of type and length (without the type byte) at w->off. */
static __always_inline long reply_message(struct reply_walk *w, char type, __u32 len)
{
	if (len < 4 || len > (1U << 30)) {
		w->lost = 1;
		return 1;
	}
	w->off += 1 + len;
	switch (type) {
	case 'E': /* ErrorResponse: the statement failed (in a pipeline, the rest to the Sync is skipped) */
		w->failed++;
		/* fallthrough */
	case 'C': /* CommandComplete */
	case 'I': /* EmptyQueryResponse */
	case 'V': /* FunctionCallResponse */
		w->done++;
		break;
	case 's': /* PortalSuspended: the statement goes on at the next Execute */
		w->suspended = 1;
		break;
	case 'Z': /* ReadyForQuery: the round trip is over */
		w->ready = 1;
		return 1;
	}
	return 0;
}

static long reply_step(__u32 i, void *ctx)
{
	struct reply_walk *w = ctx;
	char m[5];

	if (w->off + 5 > w->n) /* the end, or a header cut by it */
		return 1;
	if (bpf_probe_read_user(m, sizeof(m), w->buf + w->off)) {
		w->lost = 1;
		return 1;
	}
	return reply_message(w, m[0], be32_at(m, 1));
}

/*
 * The backend sent n bytes of a walked round trip's reply from buf: adds
 * the statements they end to w, carries a message or header cut by the end
 * of the send to the next, and says in rw whether a ReadyForQuery ended
 * them. 0 if the walk lost its place (a message that cannot be one, more
 * messages than walked, bytes that cannot be read).
 */
static __always_inline int reply_walk(struct wire *w, struct reply_walk *rw, const char *buf, __u32 n)
{
	__u32 need, have = w->out_hdr_len & 7;

	__builtin_memset(rw, 0, sizeof(*rw));
	rw->buf = buf;
	rw->n = n;
	if (have) { /* the last send ended inside a header: its rest begins this one */
		__u64 saved, rest = 0, hdr;

		have = have > 4 ? 4 : have;
		need = 5 - have;
		if (need > n || bpf_probe_read_user(&rest, need & 7, buf))
			return 0;
		__builtin_memcpy(&saved, w->out_hdr, sizeof(saved));
		/* little-endian: the saved bytes, then the new ones */
		hdr = (saved & ((1ULL << (8 * have)) - 1)) | rest << (8 * have);
		w->out_hdr_len = 0;
		rw->off = (__u64)need - 5; /* the message began before this send (wraps: + its length) */
		if (reply_message(rw, hdr & 0xff, __builtin_bswap32(hdr >> 8)) && !rw->ready)
			return 0;
	} else {
		rw->off = w->out_skip; /* the rest of a message begun before */
	}
	if (!rw->ready && bpf_loop(REPLY_MAX_MSGS, reply_step, rw, 0) == REPLY_MAX_MSGS && rw->off + 5 <= n)
		rw->lost = 1;
	if (rw->lost)
		return 0;
	w->out_skip = rw->off > n ? rw->off - n : 0;
	if (!rw->ready && rw->off < n) { /* a header cut by the end of the send */
		need = (n - rw->off) & 7;
		if (bpf_probe_read_user(w->out_hdr, need, buf + rw->off))
			return 0;
		w->out_hdr_len = need;
	}
	w->done += rw->done;
	w->failed += rw->failed;
	if (rw->suspended)
		w->flags |= WIRE_SUSPENDED;
	return 1;
}

#endif /* PGWIRE_BPF_H */
