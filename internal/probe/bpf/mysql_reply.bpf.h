/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where does the server's reply end? A reply is a stream of packets
 * (3-byte length, sequence number) that the server sends in buffer-sized
 * pieces: each send is walked packet by packet (mysql_hop, a bpf_loop) to know
 * where the next packet starts, and the first bytes of each are read to
 * follow the reply (mysql_packet, its state machine): column count, column
 * definitions, an EOF (unless the client asked for none:
 * CLIENT_DEPRECATE_EOF). A result's rows are not walked: their end is the
 * EOF or OK at a send's tail (mysql_rows_end), or an ERR there, found by a
 * scan of the tail (mysql_rows_err). With statements counted (serve, top),
 * a reply to a statement whose last reply was a result set is not walked
 * at all when its first send's tail ends it (mysql_reply_sent): most of an
 * OLTP server's replies, each a few user reads the cheaper.
 */
#ifndef MYSQL_REPLY_BPF_H
#define MYSQL_REPLY_BPF_H

#include "mysql_conn.bpf.h"

/* The walk through one send, in the loop's context. */
struct mysql_walk {
	void *buf;        /* the send's user buffer */
	__u32 n;          /* its length */
	__u32 off;        /* where the next packet starts */
	struct mysql_conn c; /* the connection's reply state, copied in and out */
	__u8 ended;       /* the reply's last packet was in this send */
};

/* Follows the reply by one packet; 1 when it was the reply's last. */
static __always_inline int mysql_packet(struct mysql_conn *c, const __u8 *p, __u32 plen)
{
	__u32 status, size;

	switch (c->part) {
	case PART_AUTH: /* an auth switch (0xfe) or more data (0x01) goes on */
		return p[0] == 0x00 || p[0] == 0xff;
	case PART_DEFS:
		return --c->left == 0;
	case PART_COLUMNS:
		if (--c->left == 0)
			c->part = (c->flags & MYSQL_NO_EOF) ? PART_ROWS : PART_COLUMNS_EOF;
		return 0;
	case PART_COLUMNS_EOF:
		if (p[0] == 0xfe && plen == 5) {
			c->part = PART_ROWS;
			/* A cursor was opened: its rows come with COM_STMT_FETCH. */
			return (le16(p + 3) & SERVER_STATUS_CURSOR_EXISTS) != 0;
		}
		c->flags |= MYSQL_NO_EOF; /* a row: the client asked for no EOF after all */
		c->part = PART_ROWS;
		/* fallthrough */
	case PART_ROWS:
		if (p[0] == 0xff)
			return 1;
		if (p[0] != 0xfe || plen >= MYSQL_MAX_PACKET) /* a row (0xfe starts only a huge one) */
			return 0;
		if (plen >= 7) /* an OK in place of the EOF */
			c->flags |= MYSQL_NO_EOF;
		break;
	default: /* PART_FIRST */
		if (p[0] == 0xff)
			return 1;
		if (p[0] == 0xfb) /* LOCAL INFILE: the client sends a file, then the server answers */
			return 0;
		if (p[0] == 0x00 && c->cmd == COM_STMT_PREPARE && plen >= 9) {
			/* statement id, columns, parameters; each list of definitions
			 * is followed by an EOF unless the client asked for none */
			__u32 cols = le16(p + 5), params = le16(p + 7);

			c->reply_id = le32(p + 1);
			c->left = cols + params;
			if (!(c->flags & MYSQL_NO_EOF))
				c->left += (cols != 0) + (params != 0);
			c->part = PART_DEFS;
			return c->left == 0;
		}
		if (p[0] != 0x00 && p[0] != 0xfe) {
			if (c->cmd == COM_STATISTICS) /* a string */
				return 1;
			/* A result set: its column count, and with MariaDB's cached
			 * metadata a byte saying whether the definitions follow. */
			c->left = lenenc32(p);
			size = lenenc_size(p[0]);
			if (plen == size + 1 && !p[size & 15])
				c->left = 0;
			c->part = PART_COLUMNS;
			if (!c->left)
				c->part = (c->flags & MYSQL_NO_EOF) ? PART_ROWS : PART_COLUMNS_EOF;
			return 0;
		}
	}
	/* an OK or EOF: the reply goes on if more results follow */
	status = status_of(p, plen);
	c->part = PART_FIRST;
	if (status & SERVER_MORE_RESULTS_EXIST) {
		c->results++;
		return 0;
	}
	return 1;
}

/*
 * One packet of the send: its head is read (completed from the head the
 * last send left, for a packet split across sends) and followed.
 */
static long mysql_hop(__u64 i, void *ctx)
{
	/* head: the packet's first MYSQL_HEAD bytes, with room for the masked
	 * offsets and sizes the verifier can check */
	__u8 head[3 * MYSQL_HEAD] = {};
	struct mysql_walk *w = ctx;
	struct mysql_conn *c = &w->c;
	__u32 avail, want, have = c->have & (MYSQL_HEAD - 1), plen;
	__s32 start = (__s32)w->off - (__s32)have; /* where the packet starts, possibly in the last send */

	if (w->off >= w->n)
		return 1;
	if (c->carry) { /* the rest of a packet begun in an earlier send */
		avail = w->n - w->off;
		if (c->carry >= avail) {
			c->carry -= avail;
			w->off = w->n;
			return 1;
		}
		w->off += c->carry;
		c->carry = 0;
		return 0;
	}
	/* The head: what the last send left, then this send's bytes. */
	if (have)
		__builtin_memcpy(head, c->head, MYSQL_HEAD);
	avail = w->n - w->off;
	want = MYSQL_HEAD - have;
	if (want > avail)
		want = avail;
	want &= 2 * MYSQL_HEAD - 1;
	if (bpf_probe_read_user(head + have, want, w->buf + w->off))
		return 1;
	if (have + want < 5) { /* not even the header and kind: keep them for the next send */
		__builtin_memcpy(c->head, head, MYSQL_HEAD);
		c->have = have + want;
		w->off = w->n;
		return 1;
	}
	plen = le24(head);
	/* A head split across sends whose payload is shorter than the head
	 * needs is complete once the packet is; else wait for the rest. */
	if (have + want < MYSQL_HEAD && have + want < plen + 4 && w->off + want >= w->n) {
		__builtin_memcpy(c->head, head, MYSQL_HEAD);
		c->have = have + want;
		w->off = w->n;
		return 1;
	}
	c->have = 0;
	/* The packet's end, from where it started. */
	if ((__s64)start + 4 + plen > w->n) {
		c->carry = start + 4 + plen - w->n;
		w->off = w->n;
	} else {
		w->off = start + 4 + plen;
	}
	if (mysql_packet(c, head + 4, plen)) {
		w->ended = 1;
		return 1;
	}
	return c->part == PART_ROWS; /* rows: their end is found at a send's tail (mysql_rows_end) */
}

/* Did the last reply to the command's statement here (serve, top: its
 * identity known) have a result set? */
static __always_inline int mysql_known_result(const struct mysql_conn *c)
{
	int i;

	if (!c->stmt_kind || !c->stmt)
		return 0;
	for (i = 0; i < MYSQL_KNOWN_RESULTS; i++)
		if (c->known_results[i] == c->stmt)
			return 1;
	return 0;
}

/* The first send of a reply to statement stmt was walked: rows, it
 * began a result set. */
static __always_inline void mysql_learn_result(struct mysql_conn *c, __u64 stmt, int rows)
{
	int i;

	if (!c->stmt_kind || !stmt)
		return;
	for (i = 0; i < MYSQL_KNOWN_RESULTS; i++)
		if (c->known_results[i] == stmt) {
			if (!rows)
				c->known_results[i] = 0;
			return;
		}
	if (rows)
		c->known_results[c->known_next++ & (MYSQL_KNOWN_RESULTS - 1)] = stmt;
}

/* Where a reply to cmd starts. */
static __always_inline __u8 first_part(__u8 cmd)
{
	switch (cmd) {
	case COM_STMT_FETCH: /* rows, then EOF */
	case COM_FIELD_LIST: /* column definitions, then EOF */
		return PART_ROWS;
	case COM_CHANGE_USER:
		return PART_AUTH;
	}
	return PART_FIRST;
}

/*
 * The tail of a send, for an ERR packet ending it: 0xff, the error code, '#'
 * and the SQL state, the message. No row starts with 0xff (not a
 * length-encoded string's first byte), so a packet of length len ending
 * the send and starting so is the ERR. Messages up to MYSQL_ERR_TAIL bytes
 * are found; a longer one ends its query at the next command, counted.
 */
#define MYSQL_ERR_TAIL 256

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[MYSQL_ERR_TAIL]);
} mysql_tail SEC(".maps");

/* The scan of a tail of m bytes (in mysql_tail) for the ERR, one packet
 * length (9 on: code, '#', state) per round: its own loop, as the walk's. */
struct mysql_err_scan {
	__u32 m;
	__u32 found;
};

static int mysql_err_at(__u32 i, struct mysql_err_scan *s)
{
	__u32 zero = 0, len = 9 + i, at;
	__u8 *tail = bpf_map_lookup_elem(&mysql_tail, &zero);

	if (!tail || len + 4 > s->m)
		return 1;
	at = (s->m - len - 4) & (MYSQL_ERR_TAIL - 1);
	if (at + 8 <= MYSQL_ERR_TAIL && le24(tail + at) == len && tail[at + 4] == 0xff && tail[at + 7] == '#') {
		s->found = 1;
		return 1;
	}
	return 0;
}

static __always_inline int mysql_rows_err(struct mysql_conn *c, void *buf, __u32 from, __u32 n)
{
	__u32 zero = 0;
	struct mysql_err_scan s = { .m = n - from };
	__u8 *tail = bpf_map_lookup_elem(&mysql_tail, &zero);

	if (!tail || from >= n)
		return 0;
	if (s.m > MYSQL_ERR_TAIL)
		s.m = MYSQL_ERR_TAIL;
	if (bpf_probe_read_user(tail, s.m & (2 * MYSQL_ERR_TAIL - 1), buf + n - s.m))
		return 0;
	bpf_loop(MYSQL_ERR_TAIL - 12, mysql_err_at, &s, 0);
	if (s.found)
		c->carry = c->have = 0;
	return s.found;
}

/*
 * A result's rows are not walked one by one (a 100-row range is 100
 * packets): the reply ends with a send whose last packet is the EOF or
 * the OK after them, so each send's tail from `from` on is checked for
 * one: a classic EOF is 9 bytes (length 5, 0xfe, warnings, status); an OK
 * in its place (CLIENT_DEPRECATE_EOF) starts with 0xfe too, of a length
 * from 7 on. An error in place of the rest of the rows (a statement
 * killed, or failing at a row) is an ERR packet at the tail (mysql_rows_err).
 * 1 when the reply ended; with "more results exist" the next result
 * follows.
 */
__noinline int mysql_rows_end(struct mysql_conn *c, __u64 ubuf, __u32 from, __u32 n)
{
	__u8 tail[2 * MYSQL_HEAD] = {};
	__u32 m = n - from, len, at;
	void *buf = (void *)ubuf;
	const __u8 *p;

	if (!c || from >= n)
		return 0;
	if (m > MYSQL_HEAD)
		m = MYSQL_HEAD;
	if (bpf_probe_read_user(tail, m & (2 * MYSQL_HEAD - 1), buf + n - m))
		return 0;
	for (len = 5; len <= MYSQL_HEAD - 4; len++) {
		if (len == 6 || len + 4 > m)
			continue;
		at = (m - len - 4) & (MYSQL_HEAD - 1);
		p = tail + at;
		if (p[0] != len || p[1] || p[2] || p[4] != 0xfe)
			continue;
		if (len >= 7)
			c->flags |= MYSQL_NO_EOF;
		c->carry = c->have = 0;
		if (status_of(p + 4, len) & SERVER_MORE_RESULTS_EXIST) {
			c->part = PART_FIRST;
			c->results++;
			return 0;
		}
		return 1;
	}
	return mysql_rows_err(c, buf, from, n);
}

/*
 * The server sent n bytes of a reply on connection c from buf: c's state
 * follows them; 1 when the reply ended in them. A global function: the
 * verifier checks its paths once, not once for each path of its caller
 * that follows the reply's end.
 */
__noinline int mysql_reply_sent(struct mysql_conn *c, __u64 buf, __u32 n)
{
	struct mysql_walk w = { .buf = (void *)buf, .n = n };
	int fresh;

	if (!c)
		return 0;
	w.c = *c;
	fresh = c->part == PART_FIRST && !(c->carry | c->have | c->results); /* the reply's first send */
	if (c->part == PART_ROWS) { /* rows since an earlier send: past the packet it ended in */
		w.off = c->carry < n ? c->carry : n;
		w.c.carry -= w.off;
	} else {
		if (fresh && mysql_known_result(c)) {
			/* A statement whose last reply was a result set: if the
			 * send's tail ends it, the column count and definitions
			 * before its rows need no walk. */
			w.c.part = PART_ROWS;
			w.ended = mysql_rows_end(&w.c, buf, 0, n);
			if (!w.ended) /* not there: walked after all */
				w.c = *c;
		}
		if (!w.ended) {
			bpf_loop(MYSQL_MAX_HOPS, mysql_hop, &w, 0);
			if (fresh)
				mysql_learn_result(&w.c, c->stmt, w.c.part == PART_ROWS);
		}
	}
	if (!w.ended && w.c.part == PART_ROWS)
		w.ended = mysql_rows_end(&w.c, buf, w.off, n);
	*c = w.c;
	if (w.ended)
		c->carry = c->have = 0;
	return w.ended;
}

#endif /* MYSQL_REPLY_BPF_H */
