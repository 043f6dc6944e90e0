/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What does a send or a read on a connection say? A server's send is its
 * greeting (the connection's id) or a piece of a reply, walked to its end
 * (mysql_reply.bpf.h); a read is the handshake response, a command's
 * header or its payload (servers read the header first), or more of a
 * long packet. A command begins the thread's query (mysql_handoff.bpf.h);
 * an SSLRequest hands the connection to the TLS library (mysql_tls.bpf.h).
 */
#ifndef MYSQL_PACKET_BPF_H
#define MYSQL_PACKET_BPF_H

#include "mysql_reply.bpf.h"
#include "mysql_handoff.bpf.h"
#include "mysql_tls.bpf.h"

/* The server sends n bytes from buf on a connection. */
static __always_inline void mysql_sent(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
				    __u64 sk, void *buf, __u32 n)
{
	__u8 hello[64] = {};
	__u32 i;

	if (c->state == MYSQL_UNSEEN) {
		/* A new connection's greeting: protocol 10, the server's version
		 * (NUL-terminated), the connection id. */
		__u32 m = n < sizeof(hello) ? n : sizeof(hello);

		if (m < 16 || bpf_probe_read_user(hello, m, buf) || hello[3] != 0 || hello[4] != 10)
			return;
		for (i = 5; i + 4 < m; i++)
			if (!hello[i]) {
				c->conn = le32(hello + i + 1);
				c->state = MYSQL_GREETED;
				return;
			}
		return;
	}
	if (c->state == MYSQL_BUSY && mysql_reply_sent(c, (__u64)buf, n))
		mysql_end(task, tl, c, sk, 0);
}

/*
 * serve: the identity of the statement a command runs, as Go will name it:
 * a query's text without its literals, a prepared statement's id in its
 * connection.
 */
static __always_inline void mysql_identity(struct mysql_conn *c, struct capture *t)
{
	struct stmt_key k = {};

	c->stmt_kind = 0;
	if (!count_statements)
		return;
	if (c->cmd == COM_QUERY) {
		__u32 text_at = 1;

		/* MySQL's query attributes before the text: none is a count of
		 * 0 and one parameter set; past any, Go reads the text (no identity). */
		if (c->flags & MYSQL_QUERY_ATTRS) {
			if (t->len < 3 || t->buf[1] || t->buf[2] != 1)
				return;
			text_at = 3;
		}
		k.queryid = stmt_text(t, text_at, t->len, 0);
		k.kind = STMT_TEXT;
	} else if (c->cmd == COM_STMT_EXECUTE && t->len >= 5 && c->conn) { /* a connection older than the trace: Go counts */
		stmt_prepared(&k, c->conn, le32((__u8 *)t->buf + 1));
	}
	c->stmt = k.queryid;
	c->stmt_kind = k.kind;
}

/*
 * A command's payload arrives: its first n bytes at payload (of len). The
 * thread's query began at its header.
 */
static __always_inline void mysql_command(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
				       __u64 sk, void *payload, __u32 n, __u32 len, int lib)
{
	struct capture *t = bpf_task_storage_get(&captures, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u32 m = text_bound(n < len ? n : len);

	c->carry = c->have = 0;
	c->reply_id = c->results = 0;
	if (!t || !m || bpf_probe_read_user(t->buf, m, payload)) {
		stat_inc(STAT_WIRE_UNREADABLE);
		mysql_cancel(thread_in(tl), &tl->wf);
		c->state = MYSQL_IDLE;
		return;
	}
	t->len = m;
	t->truncated = len > m;
	c->cmd = (__u8)t->buf[0];
	c->part = first_part(c->cmd);
	c->state = MYSQL_BUSY;
	mysql_identity(c, t);
	switch (c->cmd) {
	case COM_STMT_CLOSE:          /* no reply */
	case COM_STMT_SEND_LONG_DATA: /* no reply */
		mysql_cancel(thread_in(tl), &tl->wf);
		c->state = MYSQL_IDLE;
		break;
	case COM_QUIT: /* Go forgets the connection */
		mysql_end(task, tl, c, sk, lib);
		c->state = MYSQL_OFF;
		break;
	case COM_BINLOG_DUMP: /* a replica's stream: never ends */
	case COM_BINLOG_DUMP_GTID:
	case COM_REGISTER_SLAVE:
		mysql_cancel(thread_in(tl), &tl->wf);
		c->state = MYSQL_OFF;
		break;
	}
}

/*
 * The handshake response, the client's first packet (sequence 1; 2 over
 * TLS, after the SSLRequest): Go learns the user and database from it.
 * Its record carries it behind a command byte 0 (COM_SLEEP, which no
 * client sends); the query it makes is the authentication, which ends
 * with the server's OK or ERR. tls: read at the TLS library.
 */
static __always_inline void mysql_handshake(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
					 __u64 sk, void *payload, __u32 n, __u32 len, int tls)
{
	struct capture *t;
	__u8 caps_le[4];
	__u32 caps, m;

	if (n < 4 || bpf_probe_read_user(caps_le, sizeof(caps_le), payload))
		return;
	caps = le32(caps_le);
	if ((caps & CLIENT_SSL) && !tls) { /* an SSLRequest: TLS follows */
		mysql_tls_begins(task, c);
		return;
	}
	if (caps & CLIENT_DEPRECATE_EOF)
		c->flags |= MYSQL_NO_EOF;
	if (caps & CLIENT_QUERY_ATTRIBUTES)
		c->flags |= MYSQL_QUERY_ATTRS;
	t = bpf_task_storage_get(&captures, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	m = text_bound(n < len ? n : len);
	if (m > TEXT_MASK - 1)
		m = TEXT_MASK - 1;
	if (!t || !m || bpf_probe_read_user(t->buf + 1, m, payload))
		return;
	t->buf[0] = 0;
	t->len = m + 1;
	t->truncated = len > m;
	mysql_begin(task, tl, c, sk);
	c->cmd = 0;
	c->part = PART_AUTH;
	c->carry = c->have = 0;
	c->state = MYSQL_BUSY;
}

/* A command begins to be read: the connection's query begins. */
static __always_inline void mysql_command_begins(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
					      __u64 sk, int lib)
{
	if (c->state == MYSQL_BUSY) { /* the last reply's end was missed: it ends here */
		stat_inc(STAT_MYSQL_REPLY_UNSEEN);
		mysql_end(task, tl, c, sk, lib);
	}
	mysql_begin(task, tl, c, sk);
}

/*
 * A client packet: its header said seq and len, and n bytes of its payload
 * are at payload. begun: a command's header came alone, its query began.
 */
static __always_inline void mysql_client_packet(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
					     __u64 sk, __u8 seq, __u32 len, void *payload, __u32 n, int begun, int lib)
{
	c->cmd_left = len > n ? len - n : 0;
	if (c->state == MYSQL_GREETED) {
		if (seq == 1 || seq == 2)
			mysql_handshake(task, tl, c, sk, payload, n, len, seq == 2);
		return;
	}
	/* A command has sequence 0; anything else (the rest of an auth
	 * exchange, a LOCAL INFILE's data) is part of the reply under way. */
	if (seq != 0 || !len || !n)
		return;
	if (!begun)
		mysql_command_begins(task, tl, c, sk, lib);
	mysql_command(task, tl, c, sk, payload, n, len, lib);
}

/*
 * The server read n bytes from a connection into buf, of want it asked
 * for (0: not known; lib: see mysql_end).
 */
static __always_inline void mysql_received(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
					__u64 sk, void *buf, __u32 n, __u64 want, int lib)
{
	__u8 hdr[4];

	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	if (c->state == MYSQL_OFF)
		return;
	if (c->in_header) { /* the payload of the packet whose header came alone */
		c->in_header = 0;
		if (!c->in_len) /* a command's header not read (below): the server asks for its length */
			c->in_len = want < n ? n : want;
		mysql_client_packet(task, tl, c, sk, c->in_seq, c->in_len, buf, n,
				 c->in_seq == 0 && c->state != MYSQL_GREETED, lib);
		return;
	}
	if (c->cmd_left) { /* more of a long packet */
		c->cmd_left -= n < c->cmd_left ? n : c->cmd_left;
		return;
	}
	/* An idle connection's next packet is a command (sequence 0), and a
	 * server reads its header alone, then asks for its length: the time
	 * begins here, the length comes with the payload's read, and the
	 * header is not read (a read of user memory costs more than the
	 * rest of the call). */
	if (n == 4 && want == 4 && c->state == MYSQL_IDLE) {
		c->in_seq = 0;
		c->in_len = 0;
		c->in_header = 1;
		mysql_command_begins(task, tl, c, sk, lib);
		return;
	}
	if (n < 4 || bpf_probe_read_user(hdr, sizeof(hdr), buf))
		return;
	if (n == 4) { /* the server reads the header first, then the payload */
		c->in_seq = hdr[3];
		c->in_len = le24(hdr);
		if (!c->in_len) /* an empty packet (an empty password's answer to an auth switch): no payload to read */
			return;
		c->in_header = 1;
		if (c->in_seq == 0 && c->state != MYSQL_GREETED && c->in_len)
			mysql_command_begins(task, tl, c, sk, lib); /* its query begins as the server reads it */
		return;
	}
	mysql_client_packet(task, tl, c, sk, hdr[3], le24(hdr), buf + 4, n - 4, 0, lib);
}

#endif /* MYSQL_PACKET_BPF_H */
