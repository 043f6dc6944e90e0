/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which query is a backend running? Read from the bytes on its client
 * socket: a round trip begins with the first message the backend reads
 * and ends with the ReadyForQuery it sends. sock_recv_length and
 * sock_send_length are tracepoints, not uprobes: no trap per query, and
 * for every other socket call of the machine a pointer test. They see the
 * extended protocol (Parse/Bind/Execute), which USDT query__start misses.
 *
 * The messages of a round trip are copied when it begins (up to
 * QUERY_TEXT_MAX - 1 bytes) and sent with the record; Go reads the statement
 * out of them (internal/postgres/wire.go). Encrypted connections cannot be
 * read: they are counted, and --usdt sees their simple-protocol queries.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "sock.bpf.h"

#define WIRE_MAX_MSGS 16 /* messages walked per round trip */

/* Startup codes of PostgreSQL's protocol (after the length word). */
#define PG_SSL_REQUEST 80877103
#define PG_GSSENC_REQUEST 80877104

static __always_inline __u32 be32_at(const char *b, __u32 off)
{
	return (__u32)(__u8)b[off & TEXT_MASK] << 24 | (__u32)(__u8)b[(off + 1) & TEXT_MASK] << 16 |
	       (__u32)(__u8)b[(off + 2) & TEXT_MASK] << 8 | (__u32)(__u8)b[(off + 3) & TEXT_MASK];
}

/*
 * Walks the round trip's messages from w->text_off: notes whether it runs
 * a query and prepares a named statement, and where the next round trip
 * starts when the client sent several at once (pipelining). A Sync, a
 * simple Query or a FunctionCall is the last message of a round trip.
 */
static __always_inline void wire_walk(struct wire_text *t, struct wire *w)
{
	__u32 off = w->text_off, len, i;

	w->next_off = 0;
	for (i = 0; i < WIRE_MAX_MSGS; i++) {
		if (off + 5 > t->len) {
			w->flags |= WIRE_OPEN;
			return;
		}
		len = be32_at(t->buf, off + 1);
		if (len < 4 || len > (1U << 30)) { /* not a message: count it as a query */
			w->flags |= WIRE_EXEC;
			return;
		}
		switch (t->buf[off & TEXT_MASK]) {
		case 'Q':
		case 'F':
			w->flags |= WIRE_EXEC;
			/* fallthrough */
		case 'S':
			off += 1 + len;
			if (off < t->len)
				w->next_off = off;
			return;
		case 'E':
			w->flags |= WIRE_EXEC;
			break;
		case 'P':
			if (off + 5 < t->len && t->buf[(off + 5) & TEXT_MASK])
				w->flags |= WIRE_NAMED_PARSE;
			break;
		}
		off += 1 + len;
	}
	w->flags |= WIRE_EXEC; /* more messages than we walk: assume it runs one */
}

/* A round trip begins: the backend has just read its first message. */
static __always_inline void wire_begin(struct task_local *tl, struct wire_text *t, __u64 now)
{
	struct thread_state *ts = thread_current();
	struct wire *w = &tl->wire;

	w->flags &= WIRE_TRUNCATED;
	wire_walk(t, w);
	/* What was not captured may hold the Execute. */
	if ((w->flags & (WIRE_OPEN | WIRE_TRUNCATED)) == (WIRE_OPEN | WIRE_TRUNCATED))
		w->flags |= WIRE_EXEC;
	w->state = WIRE_BUSY;
	if (ts)
		query_begin(ts, &tl->wf, now);
}

/*
 * Encryption begins: TLS (the answer to an SSLRequest, or a direct TLS
 * ClientHello) is read in plaintext at the TLS library when the process's
 * is probed (proc_info), else the connection cannot be read; GSS never can.
 */
static __always_inline void wire_encrypted(struct task_struct *task, struct wire *w, int tls)
{
	__u32 tgid = task->tgid;
	struct proc_info *pi = bpf_map_lookup_elem(&procs, &tgid);

	if (tls && pi && (pi->flags & PROC_TLS_PROBED)) {
		w->tls = 1; /* its socket carries records from here: the library's calls tell */
		stat_inc(STAT_WIRE_TLS);
		return;
	}
	w->state = WIRE_ENCRYPTED;
	stat_inc(STAT_WIRE_ENCRYPTED);
}

/*
 * The hooks were detached for a while (duty cycles): what the socket
 * carried meanwhile went unseen, so the connection starts over as one
 * older than the trace, in step again at its next message (a round trip
 * in progress, its end, a startup's ReadyForQuery: wire_sent).
 */
static __always_inline struct task_local *wire_task(struct task_struct *task)
{
	struct task_local *tl = task_local_of(task);
	struct wire *w;

	if (!tl || tl->wire.synced_ns == resync_ns)
		return tl;
	w = &tl->wire;
	w->synced_ns = resync_ns;
	switch (w->state) {
	case WIRE_SSL_ASKED: /* the answer, the handshake, the startup may have gone by */
		w->state = WIRE_NEW;
		break;
	case WIRE_IDLE:
	case WIRE_BUSY:
		w->state = WIRE_ATTACHED;
		w->next_off = 0;
		break;
	}
	return tl;
}

/*
 * A new process's first message: a client's startup packet, or no client;
 * or, its startup gone by during a pause, already a protocol message (a
 * type letter, where a startup packet's length starts with a zero byte).
 */
static __always_inline void wire_hello(struct task_struct *task, struct wire *w, void *buf)
{
	__u32 hdr[2], code;
	__u8 first;

	if (!buf || bpf_probe_read_user(hdr, sizeof(hdr), buf)) {
		w->state = WIRE_OFF;
		return;
	}
	first = hdr[0] & 0xff;
	code = bpf_ntohl(hdr[1]);
	if (first >= 'A' && w->synced_ns) /* a message: in step from its round trip's end */
		w->state = WIRE_ATTACHED;
	else if (first >= 0x14 && first <= 0x17 && w->synced_ns && !w->tls) /* TLS begun during a pause */
		wire_encrypted(task, w, 1);
	else if (code >> 16 == 3) /* protocol 3.x */
		w->state = WIRE_STARTUP;
	else if (code == PG_SSL_REQUEST || code == PG_GSSENC_REQUEST)
		w->state = WIRE_SSL_ASKED;
	else if ((hdr[0] & 0xff) == 0x16 && !w->tls) /* a TLS ClientHello: direct SSL (PostgreSQL 17) */
		wire_encrypted(task, w, 1);
	else
		w->state = WIRE_OFF; /* a cancel request, or not a client */
}

/* A request from an idle client: copy its messages, begin a round trip. */
static __always_inline void wire_request(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct wire_text *t = bpf_task_storage_get(&wire_texts, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct wire *w = &tl->wire;
	__u32 n = text_bound(ret);

	if (!t || !buf || bpf_probe_read_user(t->buf, n, buf)) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	t->len = n;
	/* A connection older than the trace: a TLS record header is no message. */
	if (w->state == WIRE_ATTACHED && !w->tls && t->buf[0] >= 0x14 && t->buf[0] <= 0x17 && t->buf[1] == 0x03) {
		wire_encrypted(task, w, 1);
		return;
	}
	if (t->buf[0] == 'X') { /* Terminate: the client leaves, no query follows */
		w->state = WIRE_OFF;
		return;
	}
	w->flags = ret > n ? WIRE_TRUNCATED : 0;
	w->text_off = 0;
	wire_begin(tl, t, bpf_ktime_get_ns());
}

/* The backend read ret bytes of its client's messages into buf. */
static __always_inline void wire_received(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct wire *w = &tl->wire;

	switch (w->state) {
	case WIRE_NEW:
		wire_hello(task, w, buf);
		break;
	case WIRE_ATTACHED:
	case WIRE_IDLE:
		wire_request(task, tl, buf, ret);
		break;
	case WIRE_BUSY:
		if (w->flags & WIRE_OPEN) /* the rest of the round trip: most likely its Execute */
			w->flags |= WIRE_EXEC;
		break;
	}
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(wire_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct wire *w;

	if (ret <= 0 || (flags & MSG_PEEK))
		return 0;
	task = bpf_get_current_task_btf();
	tl = wire_task(task);
	if (!tl)
		return 0;
	w = &tl->wire;
	if (w->state == WIRE_NEW || (w->state == WIRE_ATTACHED && !w->sk))
		w->sk = (__u64)sk; /* the first socket a backend reads is its client's */
	if (w->sk != (__u64)sk || w->tls)
		return 0;
	wire_received(task, tl, sock_buf(task), ret);
	return 0;
}
/* The round trip ends with its ReadyForQuery: the record goes out. */
static __always_inline void wire_end(struct task_struct *task, struct task_local *tl)
{
	struct thread_state *ts = thread_current();
	struct wire *w = &tl->wire;
	__u64 now = bpf_ktime_get_ns();
	struct wire_text *t = NULL;
	struct query_event *e;
	__u32 off, n = 0;

	w->state = WIRE_IDLE;
	if (!ts || !ts->query_start_ns)
		return;
	e = query_end(ts, &tl->wf, now, w->flags & WIRE_EXEC, w->flags & WIRE_NAMED_PARSE);
	if (e || w->next_off) /* only then are the messages needed */
		t = bpf_task_storage_get(&wire_texts, task, 0, 0);
	if (e) {
		off = w->text_off & TEXT_MASK;
		if (t && t->len > off)
			n = text_bound(t->len - off);
		if (n && bpf_probe_read_kernel(e->text, n, t->buf + off))
			n = 0;
		e->text_kind = TEXT_PG_WIRE;
		query_submit(e, n, w->flags & WIRE_TRUNCATED);
	}
	if (w->next_off && t) { /* the client sent the next round trip already: it begins now */
		w->text_off = w->next_off;
		wire_begin(tl, t, now);
	}
}

/* ReadyForQuery: 'Z', length 5, transaction status. */
static __always_inline int ready_for_query(const char *m)
{
	return m[0] == 'Z' && m[1] == 0 && m[2] == 0 && m[3] == 0 && m[4] == 5 &&
	       (m[5] == 'I' || m[5] == 'T' || m[5] == 'E');
}

/* The backend sends ret bytes from buf to its client. */
static __always_inline void wire_sent(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct wire *w = &tl->wire;
	char tail[6];

	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	if (w->state == WIRE_SSL_ASKED) { /* one byte: 'S' or 'G' yes, 'N' no */
		if (bpf_probe_read_user(tail, 1, buf))
			return;
		w->state = WIRE_NEW; /* the startup packet follows, encrypted or not */
		if (tail[0] == 'S' || tail[0] == 'G')
			wire_encrypted(task, w, tail[0] == 'S');
		return;
	}
	if (ret < (int)sizeof(tail) || bpf_probe_read_user(tail, sizeof(tail), buf + ret - sizeof(tail)) ||
	    !ready_for_query(tail))
		return;
	switch (w->state) {
	case WIRE_BUSY:
		wire_end(task, tl);
		break;
	case WIRE_IDLE:
		stat_inc(STAT_WIRE_UNSEEN);
		break;
	default: /* STARTUP, ATTACHED: from here on in step with the client */
		w->state = WIRE_IDLE;
	}
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(wire_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct wire *w;

	if (ret <= 0)
		return 0;
	task = bpf_get_current_task_btf();
	tl = wire_task(task);
	if (!tl)
		return 0;
	w = &tl->wire;
	if (w->sk != (__u64)sk || w->tls || w->state == WIRE_ENCRYPTED)
		return 0;
	wire_sent(task, tl, sock_buf(task), ret);
	return 0;
}

/*
 * TLS connections, read in plaintext at the TLS library (OpenSSL's
 * SSL_read and SSL_write, int f(SSL *, void *buf, int num)): the same
 * messages as a plain socket's, before encryption and after decryption.
 * A backend has one connection, so any TLS call of it is its client's; a
 * connection older than the trace is found to be TLS at its first read.
 */
SEC("uprobe")
int wire_tls_read(struct pt_regs *ctx)
{
	struct task_local *tl = wire_task(bpf_get_current_task_btf());

	if (!tl || tl->wire.state == WIRE_OFF || tl->wire.state == WIRE_MYSQL) /* MySQL's: mysql.bpf.c */
		return 0;
	if (!tl->wire.tls) {
		tl->wire.tls = 1;
		stat_inc(STAT_WIRE_TLS);
	}
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	return 0;
}

SEC("uretprobe")
int wire_tls_read_done(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = wire_task(task);
	int ret = PT_REGS_RC(ctx);

	if (!tl || !tl->wire.tls || !tl->wire.tls_buf || ret <= 0)
		return 0;
	wire_received(task, tl, (void *)tl->wire.tls_buf, ret);
	tl->wire.tls_buf = 0;
	return 0;
}

SEC("uprobe")
int wire_tls_write(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = wire_task(task);
	int num = PT_REGS_PARM3(ctx);

	if (!tl || !tl->wire.tls || num <= 0)
		return 0;
	wire_sent(task, tl, (void *)PT_REGS_PARM2(ctx), num);
	return 0;
}
