/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which query is a MySQL or MariaDB thread running? Read from the bytes on
 * its clients' sockets, as pgwire.bpf.c reads PostgreSQL's: a query begins
 * when the server reads a command packet (COM_QUERY, COM_STMT_EXECUTE...)
 * and ends when it sends the last packet of its reply: an OK, an ERR, or
 * the EOF after the last row, without "more results exist".
 *
 * The state is per connection (socket-local storage), not per thread: in
 * MariaDB's thread pool a connection's commands run on any worker thread.
 * A command runs on one thread from its read to its reply, so the query's
 * accounting stays the thread's, as for PostgreSQL.
 *
 * A reply is a stream of packets (3-byte length, sequence number) that the
 * server sends in buffer-sized pieces: each send is walked packet by packet
 * to know where the next packet starts, and the first bytes of each are
 * read to follow the reply: column count, column definitions, an EOF
 * (unless the client asked for none: CLIENT_DEPRECATE_EOF); a result's
 * rows are not walked, their end is the EOF or OK at a send's tail
 * (mysql_rows_end). A reply whose end is missed ends at the connection's
 * next command, and is counted.
 *
 * The client's command packet (up to QUERY_TEXT_MAX - 1 bytes) goes with
 * the record; Go reads the statement out of it (internal/mysql), the text
 * of a prepared statement from the COM_STMT_PREPARE that the record of its
 * reply's statement id taught it, and user and database from the
 * connection's handshake response, sent as its first record.
 *
 * TLS connections are read in plaintext at the TLS library the server
 * maps (OpenSSL's SSL_read, its return, and SSL_write), as pgwire.bpf.c
 * reads PostgreSQL's. A uprobe has no socket storage, so their state is a
 * second struct mysql_conn per library connection (SSL *), in mysql_tls_conns;
 * the socket only says it carries TLS (MYSQL_TLS), and a socket call inside
 * SSL_read tells the library connection its socket.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "mysql_conn.bpf.h"    /* the protocol's constants, a connection's state */
#include "mysql_reply.bpf.h"   /* where a reply ends */
#include "mysql_handoff.bpf.h" /* which thread ends a query: the thread pool's hand-off */
#include "mysql_tls.bpf.h"     /* TLS connections, at the library */
#include "mysql_packet.bpf.h"  /* what a send or a read says */

SEC("tp_btf/sock_recv_length")
int BPF_PROG(mysql_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct mysql_conn *c;
	__u64 want = 0;
	void *buf;

	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	task = bpf_get_current_task_btf();
	c = mysql_conn_of(task, sk, &tl);
	if (!c) {
		if (tl && tl->kind == PROC_ROUTER) /* MySQL Router's read: pooler.bpf.h */
			pooler_received(task, sk, sock_buf(task));
		return 0;
	}
	if (tl->wire.tls_ssl) /* inside SSL_read: ciphertext */
		mysql_tls_link(task, tl, c, (__u64)sk);
	else if (c->state != MYSQL_TLS) {
		buf = sock_buf_size(task, &want);
		mysql_received(task, tl, c, (__u64)sk, buf, ret, want, 0);
	}
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(mysql_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct mysql_conn *c;
	void *buf;
	__u32 n = ret;

	if (ret <= 0)
		return 0;
	task = bpf_get_current_task_btf();
	c = mysql_conn_of(task, sk, &tl);
	if (!c)
		return 0;
	if (tl->wire.tls_ssl) { /* inside SSL_read or SSL_write: ciphertext */
		if (!tl->wire.tls_len || !(c = mysql_tls_sending(task, tl, (__u64)sk, &buf, &n)))
			return 0;
	} else if (c->state == MYSQL_TLS) {
		return 0;
	} else {
		buf = sock_buf(task);
	}
	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return 0;
	}
	mysql_sent(task, tl, c, (__u64)sk, buf, n);
	return 0;
}

/*
 * MySQL Router is about to send: ssize_t sendmsg(int fd, const struct
 * msghdr *msg, int flags), the C library's, probed in the Router's
 * process only (pooler.bpf.h says why at its entry).
 */
SEC("uprobe")
int mysql_router_send(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());
	struct user_msghdr msg;
	struct iovec iov = {};

	if (!tl || tl->kind != PROC_ROUTER)
		return 0;
	if (!bpf_probe_read_user(&msg, sizeof(msg), (void *)PT_REGS_PARM2(ctx)) && msg.msg_iovlen >= 1)
		bpf_probe_read_user(&iov, sizeof(iov), msg.msg_iov);
	pooler_sending(PT_REGS_PARM1(ctx), iov.iov_base);
	return 0;
}

/*
 * TLS connections in plaintext, at the TLS library (OpenSSL's SSL_read and
 * SSL_write, int f(SSL *, void *buf, int num)), in a MySQL server's threads
 * only (pgwire.bpf.c's programs take PostgreSQL's on the same library).
 * Each call's entry notes it in the thread's state. SSL_read: the socket
 * read inside it, if any, links its SSL * to the socket (mysql_tls_link);
 * its return (functions.go: where the return value is in place) reads the
 * plaintext. SSL_write: its first send reads the plaintext
 * (mysql_tls_sending), so no return probe is needed.
 */
SEC("uprobe")
int mysql_tls_read(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());

	if (!tl || tl->kind != PROC_MYSQL)
		return 0;
	tl->wire.tls_ssl = PT_REGS_PARM1(ctx);
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	tl->wire.tls_len = 0;
	return 0;
}

SEC("uretprobe")
int mysql_tls_read_done(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = task_local_of(task);
	struct mysql_tls_key key = { .tgid = task->tgid };
	struct mysql_tls_conn *t;
	int ret = PT_REGS_RC(ctx);
	void *buf;

	if (!tl || tl->kind != PROC_MYSQL || !tl->wire.tls_ssl || tl->wire.tls_len)
		return 0;
	key.ssl = tl->wire.tls_ssl;
	buf = (void *)tl->wire.tls_buf;
	tl->wire.tls_ssl = tl->wire.tls_buf = 0;
	if (ret <= 0 || !(t = bpf_map_lookup_elem(&mysql_tls_conns, &key)))
		return 0;
	mysql_received(task, tl, mysql_resync(&t->c), t->sk, buf, ret, 0, 1);
	if (t->c.state == MYSQL_OFF && t->c.cmd == COM_QUIT) /* the client left: so does its state */
		bpf_map_delete_elem(&mysql_tls_conns, &key);
	return 0;
}

SEC("uprobe")
int mysql_tls_write(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());
	int num = PT_REGS_PARM3(ctx);

	if (!tl || tl->kind != PROC_MYSQL || num <= 0)
		return 0;
	tl->wire.tls_ssl = PT_REGS_PARM1(ctx);
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	tl->wire.tls_len = num;
	return 0;
}
