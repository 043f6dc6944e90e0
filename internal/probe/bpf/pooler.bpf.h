/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Queries behind a connection pooler (pgbouncer, Go tracks its threads as
 * PROC_POOLER) or MySQL Router (PROC_ROUTER): the client connection each
 * round trip a server reads was forwarded for.
 *
 * Behind pgbouncer a backend's peer is pgbouncer, and in transaction
 * pooling one server connection serves many clients in turn. pgbouncer
 * reads a client's request into that client's buffer, and sends it from
 * that same buffer to the server connection it linked the client to, at
 * once or after the client waited for a free one: so at the send, the
 * buffer's address says whose request it is (pooler_reads, made at the
 * read). The send leaves that client on the server connection
 * (pooled_conns), and the backend takes it when it reads the request and
 * begins the round trip (pooled_begin), for its records (pooled_record). The send is seen at its entry (a
 * uprobe on the C library's send, in the pooler's process only): the
 * kernel's sock_send_length fires after the bytes were queued, when the
 * backend may have read them already. The next client of the connection
 * is left there only after the pooler read the backend's ReadyForQuery,
 * which ends the round trip: so the backend always takes its own.
 *
 * What the pooler sends from a buffer of its own (the SET of the client's
 * application_name before its first request on a connection, the
 * server_reset_query when its session ends) goes out right after it read
 * that client, before any other socket is read: it is the client the
 * thread read last. That read may have found nothing: pgbouncer tries a
 * read of a waiting client it links to a server coming free before it
 * takes the client's request out of its buffer; so a read counts whatever
 * it returned. A read of a server connection since: the client is not
 * known.
 *
 * MySQL Router's I/O threads do the same with recvmsg and sendmsg: a
 * client's bytes read, then written to its server connection by the same
 * thread, as they came (TLS passed through) or decrypted and encrypted
 * again (TLS ended at the Router, which may then share a server connection
 * among clients: connection_sharing). Its sends go out from buffers of its
 * own, so the client is the one the thread read last. But it also talks
 * to a server on its own after reading that server: its handshake on a
 * new server connection, the session state it restores on a shared one
 * before the client's request. So the pairs are learned both ways: a
 * client read, then a send to a server connection; a server connection
 * read, then a send to a client (the reply forwarded). A send to a server
 * with no client known leaves the connection's client as it was. A MySQL
 * reply ends before the Router reads it, so the record, sent at the
 * reply's end, takes the connection's client then (pooled_conn_record).
 */
#ifndef POOLER_BPF_H
#define POOLER_BPF_H

#include "state.bpf.h"
#include "files.bpf.h"
#include <bpf/bpf_endian.h>

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/*
 * Each server connection's client now, behind a pooler. Every request the
 * pooler sends puts its connection's entry again, just before the backend
 * reads it: an entry evicted meanwhile costs only connections idle since.
 */
#define POOLED_CONNS 1024

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POOLED_CONNS);
	__type(key, struct conn_key);
	__type(value, struct pooled_for);
} pooled_conns SEC(".maps");

/* The pooler's reads of its clients' requests, by the buffer they went to. */
struct pooler_read {
	__u64 buf;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024); /* a request waiting for a server holds one: pgbouncer's max_client_conn is 100 by default */
	__type(key, struct pooler_read);
	__type(value, struct client_end);
} pooler_reads SEC(".maps");

/* What a pooler's thread read last: a client (family 0: none), or a server connection. */
struct pooler_last {
	struct client_end client;
	struct conn_key server; /* when from_server */
	__u32 from_server;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pooler_last);
} pooler_last SEC(".maps");

/* The TCP ports traced servers listen on (Go fills it): a pooler's socket to one is a server connection. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u32);
} server_ports SEC(".maps");

/*
 * The current round trip's client, of a backend behind a pooler: apart
 * from its wire state, so that the backends of no pooler do not carry it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pooled_for);
} pooled_trips SEC(".maps");

/* Set once a pooler sent to a server: until then no backend looks its client up. */
volatile __u32 pooled_seen;

/* An IPv4 address as IPv6 writes it (::ffff:a.b.c.d): both ends of one connection agree, whatever their family. */
static __always_inline void addr_v4(__u8 out[16], __be32 a)
{
	__builtin_memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	__builtin_memcpy(out + 12, &a, 4);
}

/* A TCP socket's local (rcv_saddr) or remote (daddr) address, in 16 bytes. */
static __always_inline void sock_addr(struct sock *sk, __u16 family, int remote, __u8 out[16])
{
	if (family == AF_INET6) {
		if (remote)
			BPF_CORE_READ_INTO(out, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		else
			BPF_CORE_READ_INTO(out, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		return;
	}
	addr_v4(out, remote ? BPF_CORE_READ(sk, __sk_common.skc_daddr) : BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr));
}

/* The host's pid of the process a unix socket's peer credentials name. */
static __always_inline __u32 peer_pid(struct sock *sk)
{
	struct pid *p = BPF_CORE_READ(sk, sk_peer_pid);
	int nr = 0;

	if (p)
		bpf_core_read(&nr, sizeof(nr), &p->numbers[0].nr);
	return nr;
}

/* The key of a backend's connection, from its socket. */
static __always_inline int backend_conn_key(struct sock *sk, struct conn_key *k)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	__builtin_memset(k, 0, sizeof(*k));
	if (family == AF_UNIX) {
		k->server_sk = (__u64)sk;
		return 1;
	}
	if (family != AF_INET && family != AF_INET6)
		return 0;
	sock_addr(sk, family, 0, k->server_addr);
	sock_addr(sk, family, 1, k->client_addr);
	k->server_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	k->client_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	return 1;
}

/*
 * The key of the server connection a pooler's socket is the client end
 * of; 0 if its peer is no traced server. A unix socket's peer credentials
 * are the listening process's: a traced postmaster's or MySQL server's;
 * TCP: a traced server's port.
 */
static __always_inline int pooler_server_key(struct sock *sk, struct conn_key *k)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family), port;
	struct proc_info *pi;
	__u32 pid;

	__builtin_memset(k, 0, sizeof(*k));
	if (family == AF_UNIX) {
		pid = peer_pid(sk);
		pi = bpf_map_lookup_elem(&procs, &pid);
		if (!pi || (pi->kind != PROC_POSTGRES && pi->kind != PROC_MYSQL) || pi->instance != pid)
			return 0;
		k->server_sk = (__u64)BPF_CORE_READ((struct unix_sock *)sk, peer);
		return k->server_sk != 0;
	}
	if (family != AF_INET && family != AF_INET6)
		return 0;
	port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (!bpf_map_lookup_elem(&server_ports, &port))
		return 0;
	sock_addr(sk, family, 1, k->server_addr);
	sock_addr(sk, family, 0, k->client_addr);
	k->server_port = port;
	k->client_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	return 1;
}

/* The client a pooler's socket to it shows: its address and port, or over a unix socket its process. */
static __always_inline void client_end_of(struct sock *sk, struct client_end *c)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);

	__builtin_memset(c, 0, sizeof(*c));
	c->family = family;
	if (family == AF_UNIX) {
		c->pid = peer_pid(sk);
		return;
	}
	if (family != AF_INET && family != AF_INET6) {
		c->family = 0;
		return;
	}
	sock_addr(sk, family, 1, c->addr);
	c->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

/* A pooler's thread read from a socket into buf (NULL: it read nothing): a client's request, or a server's reply. */
static __always_inline void pooler_received(struct task_struct *task, struct sock *sk, void *buf)
{
	struct pooler_last *last = bpf_task_storage_get(&pooler_last, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct pooler_read r = {.buf = (__u64)buf, .tgid = task->tgid};

	if (!last)
		return;
	last->from_server = pooler_server_key(sk, &last->server);
	if (last->from_server) {
		last->client.family = 0;
		return;
	}
	client_end_of(sk, &last->client);
	if (buf)
		bpf_map_update_elem(&pooler_reads, &r, &last->client, BPF_ANY);
}

/*
 * A pooler's thread is about to send from buf on descriptor fd. To a
 * server connection: the client the bytes are for is its client now, if
 * known. To a client, right after reading a server connection: that
 * connection's reply, so the client is the connection's.
 */
static __always_inline void pooler_sending(int fd, void *buf)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pooler_read r = {.buf = (__u64)buf, .tgid = task->tgid};
	struct pooled_for v = {.pooler = task->tgid};
	struct pooler_last *last = bpf_task_storage_get(&pooler_last, task, 0, 0);
	struct file *f = file_of(fd);
	struct client_end *c;
	struct socket *so;
	struct conn_key k;
	struct sock *sk;

	if (file_type(f) != S_IFSOCK)
		return;
	so = BPF_CORE_READ(f, private_data);
	sk = BPF_CORE_READ(so, sk);
	if (!sk)
		return;
	if (!pooler_server_key(sk, &k)) {
		if (last && last->from_server) {
			client_end_of(sk, &v.client);
			if (v.client.family)
				bpf_map_update_elem(&pooled_conns, &last->server, &v, BPF_ANY);
		}
		return;
	}
	c = bpf_map_lookup_elem(&pooler_reads, &r);
	if (!c && last)
		c = &last->client;
	if (c && c->family) {
		v.client = *c;
		bpf_map_update_elem(&pooled_conns, &k, &v, BPF_ANY);
	} else { /* its client as it was; none known yet: the pooler's */
		bpf_map_update_elem(&pooled_conns, &k, &v, BPF_NOEXIST);
	}
	pooled_seen = 1;
}

/*
 * The client a server connection's request came from, behind a pooler,
 * into out; 0 if it came from none. A unix socket's entry is kept by the
 * address of the server's socket, which a later socket may take: it counts
 * only if the process at the other end (the socket's peer credentials) is
 * the pooler that left it.
 */
static __always_inline int pooled_client(struct sock *sk, struct pooled_for *out)
{
	struct pooled_for *v;
	struct conn_key k;

	if (!sk || !backend_conn_key(sk, &k))
		return 0;
	v = bpf_map_lookup_elem(&pooled_conns, &k);
	if (!v || (k.server_sk && v->pooler != peer_pid(sk)))
		return 0;
	*out = *v;
	return 1;
}

/* A backend begins a round trip on its connection: whom it is for, behind a pooler. */
static __always_inline void pooled_begin(struct task_struct *task, struct wire *w)
{
	struct pooled_for *trip, v;

	if (!pooled_seen)
		return;
	trip = bpf_task_storage_get(&pooled_trips, task, 0, 0);
	if (trip)
		__builtin_memset(trip, 0, sizeof(*trip));
	if (!pooled_client((struct sock *)w->sk, &v))
		return;
	if (!trip)
		trip = bpf_task_storage_get(&pooled_trips, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (trip)
		*trip = v;
}

/* A record of the backend's round trip: its client behind a pooler, if any. */
static __always_inline void pooled_record(struct query_event *e)
{
	struct pooled_for *trip;

	if (pooled_seen && (trip = bpf_task_storage_get(&pooled_trips, bpf_get_current_task_btf(), 0, 0)))
		e->pooled = *trip;
}

/*
 * A record of a MySQL server's query on connection sk, at its reply's
 * end: the connection's client now, behind MySQL Router, if any. (The
 * thread sending the reply may not be the one that read the command, in
 * MariaDB's thread pool: the connection, not the thread, tells.)
 */
static __always_inline void pooled_conn_record(struct query_event *e, __u64 sk)
{
	if (pooled_seen)
		pooled_client((struct sock *)sk, &e->pooled);
}

#endif /* POOLER_BPF_H */
