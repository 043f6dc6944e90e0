/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What does the kernel keep of a MySQL or MariaDB connection, and what do
 * its packets' fields say? The protocol's constants (commands,
 * capabilities, status flags), the connection's state (struct mysql_conn,
 * per socket in mysql_conns; a TLS connection's in mysql_tls.bpf.h), and
 * the readers of a packet's little-endian and length-encoded fields.
 * Everything mysql.bpf.c's other headers share.
 */
#ifndef MYSQL_CONN_BPF_H
#define MYSQL_CONN_BPF_H

#include "sock.bpf.h"

#define MYSQL_HEAD 32       /* a packet's header and the first payload bytes its kind needs (a power of 2) */
#define MYSQL_MAX_HOPS 1024 /* packets walked per send, before a result's rows */
#define MYSQL_KNOWN_RESULTS 8 /* statements per connection known to reply with a result set (a power of 2) */
#define MYSQL_MAX_PACKET 0xffffff

/* Commands (the first payload byte of a client's packet with sequence 0). */
#define COM_QUIT 0x01
#define COM_INIT_DB 0x02
#define COM_QUERY 0x03
#define COM_FIELD_LIST 0x04
#define COM_STATISTICS 0x09
#define COM_CHANGE_USER 0x11
#define COM_BINLOG_DUMP 0x12
#define COM_REGISTER_SLAVE 0x15
#define COM_STMT_PREPARE 0x16
#define COM_STMT_EXECUTE 0x17
#define COM_STMT_SEND_LONG_DATA 0x18
#define COM_STMT_CLOSE 0x19
#define COM_STMT_FETCH 0x1c
#define COM_BINLOG_DUMP_GTID 0x1e
#define COM_STMT_BULK_EXECUTE 0xfa /* MariaDB */

#define CLIENT_SSL (1U << 11)
#define CLIENT_DEPRECATE_EOF (1U << 24)
#define CLIENT_QUERY_ATTRIBUTES (1U << 27) /* MySQL 8.0.23 on */
#define SERVER_MORE_RESULTS_EXIST 0x0008
#define SERVER_STATUS_CURSOR_EXISTS 0x0040

/* Where a connection is. */
enum mysql_state {
	MYSQL_UNSEEN = 0,  /* its first packet not seen yet: older than the trace, or new */
	MYSQL_GREETED = 1, /* the server sent its greeting: the handshake response comes next */
	MYSQL_IDLE = 2,    /* between commands */
	MYSQL_BUSY = 3,    /* from a command to the end of its reply (the handshake too) */
	MYSQL_OFF = 4,     /* encrypted, a replication stream, or gone: not followed */
	MYSQL_TLS = 5,     /* a socket carrying TLS: followed in plaintext at the library (mysql_tls_conns) */
};

/* Where in its reply the server is. */
enum mysql_part {
	PART_FIRST = 0,       /* the first packet of a reply, or of its next result set */
	PART_AUTH = 1,        /* the authentication exchange: it ends with an OK or an ERR */
	PART_DEFS = 2,        /* a COM_STMT_PREPARE's parameter and column definitions */
	PART_COLUMNS = 3,     /* a result set's column definitions */
	PART_COLUMNS_EOF = 4, /* the EOF after them */
	PART_ROWS = 5,        /* rows, until an EOF, OK or ERR */
};

/* What a connection's client is known to do (bits). */
enum mysql_flag {
	MYSQL_NO_EOF = 1,  /* CLIENT_DEPRECATE_EOF: no EOF after column definitions */
	MYSQL_TLS_NEW = 2, /* a socket whose SSLRequest was seen: its handshake response comes through SSL_read */
	MYSQL_QUERY_ATTRS = 4, /* CLIENT_QUERY_ATTRIBUTES: a COM_QUERY's parameters come before its text */
};

struct mysql_conn {
	__u64 conn;      /* the connection id of the server's greeting; 0: not seen */
	__u32 carry;     /* bytes of the packet in progress still to be sent */
	__u32 left;      /* definitions left in this part of the reply */
	__u32 reply_id;  /* the statement id a COM_STMT_PREPARE's reply gave */
	__u32 owner;     /* the thread whose query the command is */
	__u32 in_len;    /* the client packet whose header was read alone: its length... */
	__u32 cmd_left;  /* bytes of the client's packet still to be read, past what was captured */
	__u32 results;   /* results the reply ended so far with "more results exist": a multi-statement command's */
	__u8 state;      /* enum mysql_state */
	__u8 cmd;        /* the command running; 0 for the handshake */
	__u8 part;       /* enum mysql_part */
	__u8 flags;      /* enum mysql_flag */
	__u8 have;       /* bytes of head kept from the last send: a packet split across sends */
	__u8 in_seq;     /* ...its sequence number... */
	__u8 in_header;  /* ...when its payload comes next (servers read the header first) */
	__u8 stmt_kind;  /* count_statements: the command's statement identity (enum stmt_kind, 0: none)... */
	__u64 synced_ns; /* the resync_ns its state follows: another, and it resyncs */
	__u64 stmt;      /* ...and its hash */
	__u64 known_results[MYSQL_KNOWN_RESULTS]; /* statements whose last reply here was a result set (mysql_reply_sent), 0: none */
	__u8 known_next; /* the slot of known_results to take next */
	__u8 head[MYSQL_HEAD];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mysql_conn);
} mysql_conns SEC(".maps");

static __always_inline __u32 le16(const __u8 *p) { return p[0] | (__u32)p[1] << 8; }
static __always_inline __u32 le24(const __u8 *p) { return p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16; }
static __always_inline __u32 le32(const __u8 *p) { return le24(p) | (__u32)p[3] << 24; }

/* The size of a length-encoded integer starting with byte b. */
static __always_inline __u32 lenenc_size(__u8 b)
{
	switch (b) {
	case 0xfc:
		return 3;
	case 0xfd:
		return 4;
	case 0xfe:
		return 9;
	}
	return 1;
}

/* The value of a length-encoded integer that fits 32 bits (a count). */
static __always_inline __u32 lenenc32(const __u8 *p)
{
	switch (p[0]) {
	case 0xfc:
		return le16(p + 1);
	case 0xfd:
		return le24(p + 1);
	}
	return p[0];
}

/*
 * The status flags of an OK or EOF packet (p: its payload's head, plen its
 * length): an EOF is 5 bytes (0xfe, warnings, status); an OK is its header,
 * affected rows, last insert id, then the status.
 */
static __always_inline __u32 status_of(const __u8 *p, __u32 plen)
{
	__u32 off;

	if (p[0] == 0xfe && plen == 5)
		return le16(p + 3);
	off = 1 + lenenc_size(p[1]);
	off += lenenc_size(p[off & 15]);
	return le16(p + (off & 31)); /* p has MYSQL_HEAD bytes of slack behind it */
}

/*
 * The hooks were detached for a while (duty cycles): the connection's
 * packets went unseen, so it waits for the client's next command, as one
 * older than the trace; a reply in progress is not followed.
 */
static __always_inline struct mysql_conn *mysql_resync(struct mysql_conn *c)
{
	if (c->synced_ns == resync_ns)
		return c;
	c->synced_ns = resync_ns;
	if (c->state == MYSQL_GREETED || c->state == MYSQL_IDLE || c->state == MYSQL_BUSY) {
		c->state = MYSQL_IDLE;
		c->carry = c->left = c->cmd_left = 0;
		c->have = c->in_header = 0;
		c->part = PART_FIRST;
	}
	return c;
}

/* The connection of a socket call of a MySQL thread; NULL for any other. */
static __always_inline struct mysql_conn *mysql_conn_of(struct task_struct *task, struct sock *sk, struct task_local **tl)
{
	struct mysql_conn *c;

	*tl = task_local_of(task);
	if (!*tl || (*tl)->kind != PROC_MYSQL)
		return NULL;
	c = bpf_sk_storage_get(&mysql_conns, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c) {
		stat_inc(STAT_MYSQL_CONN_FULL);
		return NULL;
	}
	return mysql_resync(c);
}

#endif /* MYSQL_CONN_BPF_H */
