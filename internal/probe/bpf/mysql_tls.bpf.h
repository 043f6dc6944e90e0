/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which connection is a TLS library call's? TLS connections are read in
 * plaintext at the library the server maps (OpenSSL's SSL_read, its return,
 * and SSL_write). A uprobe has no socket storage, so their state is a
 * second struct mysql_conn per library connection (SSL *), in mysql_tls_conns;
 * the socket only says it carries TLS (MYSQL_TLS), and a socket call inside
 * SSL_read tells the library connection its socket (mysql_tls_link).
 */
#ifndef MYSQL_TLS_BPF_H
#define MYSQL_TLS_BPF_H

#include "mysql_conn.bpf.h"

/*
 * TLS connections, by the TLS library's connection (SSL *) in the server
 * process: their protocol state, read in plaintext at the library, and
 * the socket they were last read from (the connection's key elsewhere).
 * LRU: a connection that ends without COM_QUIT is not seen to end.
 */
struct mysql_tls_key {
	__u32 tgid;
	__u32 pad;
	__u64 ssl;
};

struct mysql_tls_conn {
	struct mysql_conn c;
	__u64 sk;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct mysql_tls_key);
	__type(value, struct mysql_tls_conn);
} mysql_tls_conns SEC(".maps");

/*
 * An SSLRequest on a socket: TLS follows. Read in plaintext at the library
 * when the process's is probed (proc_info), else not followed (counted).
 */
static __always_inline void mysql_tls_begins(struct task_struct *task, struct mysql_conn *c)
{
	__u32 tgid = task->tgid;
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &tgid);

	if (pi && (pi->flags & PROC_TLS_PROBED)) {
		c->state = MYSQL_TLS;
		c->flags |= MYSQL_TLS_NEW;
		stat_inc(STAT_WIRE_TLS);
		return;
	}
	stat_inc(STAT_WIRE_ENCRYPTED);
	c->state = MYSQL_OFF;
}

/*
 * The thread reads ciphertext inside SSL_read: the socket carries TLS
 * from here on (a connection older than the trace is found so), and the
 * library connection learns its socket: a new one, after its SSLRequest,
 * starts where the greeting left the socket; an SSL * that served another
 * socket before was freed and reused.
 */
static __always_inline void mysql_tls_link(struct task_struct *task, struct task_local *tl, struct mysql_conn *c,
					__u64 sk)
{
	struct mysql_tls_key key = { .tgid = task->tgid, .ssl = tl->wire.tls_ssl };
	struct mysql_tls_conn *t = bpf_map_lookup_elem(&mysql_tls_conns, &key);
	struct mysql_tls_conn fresh = {};

	if (c->state != MYSQL_TLS) {
		c->state = MYSQL_TLS;
		stat_inc(STAT_WIRE_TLS);
	}
	if (t && t->sk == sk && !(c->flags & MYSQL_TLS_NEW))
		return;
	fresh.sk = sk;
	if (c->flags & MYSQL_TLS_NEW) {
		fresh.c.conn = c->conn;
		fresh.c.state = MYSQL_GREETED;
		c->flags &= ~MYSQL_TLS_NEW;
	}
	if (bpf_map_update_elem(&mysql_tls_conns, &key, &fresh, BPF_ANY))
		stat_inc(STAT_MYSQL_CONN_FULL);
}

/*
 * The first send inside the thread's SSL_write: the plaintext its entry
 * noted is read now, in the tracepoint, where a reply another thread's
 * query waits for can end it (mysql_end); NULL when the library connection
 * is not followed (not read yet: older than the trace, found at its next
 * read) or another socket's (a stale note).
 */
static __always_inline struct mysql_conn *mysql_tls_sending(struct task_struct *task, struct task_local *tl, __u64 sk,
						       void **buf, __u32 *n)
{
	struct mysql_tls_key key = { .tgid = task->tgid, .ssl = tl->wire.tls_ssl };
	struct mysql_tls_conn *t;

	*buf = (void *)tl->wire.tls_buf;
	*n = tl->wire.tls_len;
	tl->wire.tls_ssl = tl->wire.tls_buf = 0; /* the write's next sends are ciphertext only */
	tl->wire.tls_len = 0;
	t = bpf_map_lookup_elem(&mysql_tls_conns, &key);
	if (!t || t->sk != sk)
		return NULL;
	return mysql_resync(&t->c);
}

#endif /* MYSQL_TLS_BPF_H */
