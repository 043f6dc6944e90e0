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
 * QUERY_TEXT_MAX bytes) and sent with the record; Go reads the statement
 * out of them (internal/postgres/wire.go). Encrypted connections cannot be
 * read: they are counted, and --usdt sees their simple-protocol queries.
 *
 * A round trip may run many statements: a pipeline or a batch (many
 * Executes before one Sync), a simple Query holding several. The server
 * runs them in turn and sends their replies when its buffer fills, at a
 * Flush or at the Sync, so there is no socket call between one statement
 * and the next: the kernel sees a statement end only when the reply that
 * says so (CommandComplete, ErrorResponse...) is sent. Such a round trip's
 * replies are walked message by message (pgwire.bpf.h), and each send that
 * ends statements ends a record holding them (`statements`): one record
 * per statement where the sends tell them apart, a group sharing its time
 * where one send ended several (counted: wire_grouped). A round trip of one
 * statement, most of them, is not walked: its ReadyForQuery ends it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "sock.bpf.h"
#include "pgwire.bpf.h"
#include "pgwire_capture.bpf.h"
#include "pgwire_portal.bpf.h"
#include "pgwire_identity.bpf.h" /* serve: what a statement is counted under */
#include "pooler.bpf.h"

/* Startup codes of PostgreSQL's protocol (after the length word). */
#define PG_SSL_REQUEST 80877103
#define PG_GSSENC_REQUEST 80877104

/* A round trip begins: the backend has just read its first message. */
static __always_inline void pgwire_begin(struct task_local *tl, struct capture *t, __u64 now)
{
	struct thread_state *ts = thread_in(tl);
	struct wire *w = &tl->wire;

	w->flags &= WIRE_TRUNCATED;
	__builtin_memset(&w->out, 0, sizeof(w->out));
	w->done = w->recorded = w->failed = w->execs = w->text_first = 0;
	w->opened = w->resumed = 0;
	w->text_sent = w->reply_quiet = 0;
	pgwire_walk(t, w);
	if (w->flags & WIRE_WALK) /* it may run several: they may change the application (stmt_application) */
		w->application_ptr = 0;
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
static __always_inline void pgwire_encrypted(struct task_struct *task, struct wire *w, int tls)
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
 * The task-local state of a thread whose client speaks PostgreSQL's
 * protocol; NULL for any other. Every program here starts from it: the
 * threads of other engines' servers (a MySQL server's, which mysql.bpf.c
 * follows) and of storage engines are left out here, by their process's
 * kind.
 *
 * The hooks were detached for a while (duty cycles): what the socket
 * carried meanwhile went unseen, so the connection starts over as one
 * older than the trace, in step again at its next message (a round trip
 * in progress, its end, a startup's ReadyForQuery: pgwire_sent).
 */
static __always_inline struct task_local *pgwire_sync(struct task_local *tl)
{
	struct wire *w;

	if (!tl || tl->kind != PROC_POSTGRES)
		return NULL;
	if (tl->wire.synced_ns == resync_ns)
		return tl;
	w = &tl->wire;
	w->synced_ns = resync_ns;
	w->application_ptr = 0; /* its name may have changed twice meanwhile (stmt_application) */
	switch (w->state) {
	case WIRE_SSL_ASKED: /* the answer, the handshake, the startup may have gone by */
		w->state = WIRE_NEW;
		break;
	case WIRE_IDLE:
	case WIRE_BUSY:
		w->state = WIRE_ATTACHED;
		w->next_off = 0;
		/* portals may have ended unseen: counted at their end only if seen again */
		w->open = w->open_unnamed = 0;
		w->portal_ns = 0;
		break;
	}
	return tl;
}

static __always_inline struct task_local *pgwire_task(struct task_struct *task)
{
	return pgwire_sync(task_local_of(task));
}

/*
 * A new process's first message: a client's startup packet, or no client;
 * or, its startup gone by during a pause, already a protocol message (a
 * type letter, where a startup packet's length starts with a zero byte).
 */
static __always_inline void pgwire_hello(struct task_struct *task, struct wire *w, void *buf)
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
		pgwire_encrypted(task, w, 1);
	else if (code >> 16 == 3) /* protocol 3.x */
		w->state = WIRE_STARTUP;
	else if (code == PG_SSL_REQUEST || code == PG_GSSENC_REQUEST)
		w->state = WIRE_SSL_ASKED;
	else if ((hdr[0] & 0xff) == 0x16 && !w->tls) /* a TLS ClientHello: direct SSL (PostgreSQL 17) */
		pgwire_encrypted(task, w, 1);
	else
		w->state = WIRE_OFF; /* a cancel request, or not a client */
}

/* A request from an idle client: copy its messages, begin a round trip. */
static __always_inline void pgwire_request(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct capture *t = bpf_task_storage_get(&captures, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	struct wire *w = &tl->wire;
	__u32 n = capture_bound(ret);

	if (!t || !buf || bpf_probe_read_user(t->buf, n, buf)) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	t->len = n;
	t->part = t->at = 0;
	t->walked = ret;
	/* A connection older than the trace: a TLS record header is no message. */
	if (w->state == WIRE_ATTACHED && !w->tls && t->buf[0] >= 0x14 && t->buf[0] <= 0x17 && t->buf[1] == 0x03) {
		pgwire_encrypted(task, w, 1);
		return;
	}
	if (t->buf[0] == 'X') { /* Terminate: the client leaves, no query follows */
		w->state = WIRE_OFF;
		return;
	}
	w->flags = ret > n ? WIRE_TRUNCATED : 0;
	w->text_off = 0;
	__builtin_memset(&w->in, 0, sizeof(w->in)); /* a read that begins a round trip begins a message */
	pooled_begin(task, w);
	pgwire_begin(tl, t, bpf_ktime_get_ns());
	if (w->flags & WIRE_WALK) {
		struct msg_walk mw = {};

		if (pgwire_request_walk(w, &mw, buf, ret) && (__u32)ret > n) /* its rest: a second part */
			pgwire_rest(task, w, t, buf, n, ret, 0, 0, &mw);
	}
}

/* The backend read ret bytes of its client's messages into buf. */
static __always_inline void pgwire_received(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct wire *w = &tl->wire;

	switch (w->state) {
	case WIRE_NEW:
		pgwire_hello(task, w, buf);
		break;
	case WIRE_ATTACHED:
	case WIRE_IDLE:
		pgwire_request(task, tl, buf, ret);
		break;
	case WIRE_BUSY:
		if (w->flags & WIRE_OPEN) /* the rest of the round trip: most likely its Execute */
			w->flags |= WIRE_EXEC;
		if ((w->flags & (WIRE_WALK | WIRE_IN_LOST)) == WIRE_WALK)
			pgwire_recapture(task, w, buf, ret);
		break;
	}
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(pgwire_recv, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct wire *w;

	if (flags & MSG_PEEK)
		return 0;
	task = bpf_get_current_task_btf();
	tl = task_local_of(task);
	if (tl && tl->kind == PROC_POOLER) { /* a read that found nothing tells too: pooler.bpf.h */
		pooler_received(task, sk, ret > 0 ? sock_buf(task) : NULL);
		return 0;
	}
	if (ret <= 0)
		return 0;
	tl = pgwire_sync(tl);
	if (!tl)
		return 0;
	w = &tl->wire;
	if (w->state == WIRE_NEW || (w->state == WIRE_ATTACHED && !w->sk))
		w->sk = (__u64)sk; /* the first socket a backend reads is its client's */
	if (w->sk != (__u64)sk || w->tls)
		return 0;
	pgwire_received(task, tl, sock_buf(task), ret);
	return 0;
}
/*
 * The round trip's statements its replies ended since the last record
 * are done, now: a record holding them (the first of the round trip
 * teaches Go the statements it prepares; one that leaves a fresh portal
 * suspended, its statement: a later record may end it). earlier_ns: the
 * time of the earlier parts of the resumed portals among them.
 */
static __always_inline struct query_event *pgwire_record(struct thread_state *ts, struct task_local *tl, __u64 now,
						       __u32 statements, int timed, __u64 earlier_ns, int opens)
{
	struct wire *w = &tl->wire;
	struct query_ending how = {
		.statements = statements,
		.timed = timed,
		/* and a round trip that binds a named portal it does not run: Go learns its statement */
		.teaches = ((w->flags & WIRE_NAMED_PARSE) && !w->text_sent) || opens ||
			   (!statements && !w->done && (w->flags & (WIRE_NAMED_PORTAL | WIRE_SUSPENDED)) == WIRE_NAMED_PORTAL),
		.single = !(w->flags & WIRE_WALK),
		.earlier_ns = earlier_ns,
	};
	struct query_event *e;

	if (count_statements && how.statements == 1 && how.single)
		pgwire_identity(w, &how.stmt);
	else if (count_statements && how.statements && !how.single && !how.teaches && !earlier_ns)
		pgwire_walk_identity(w, &how.stmt, statements);
	if (w->flags & WIRE_SUSPENDED) { /* a part of a statement: the rest comes in a later round trip */
		how.teaches |= !!(w->flags & WIRE_NAMED_PORTAL);
		w->portal_ns += now - ts->query_start_ns;
	}
	e = query_end(ts, &tl->wf, now, how);
	if (e) {
		e->first_statement = w->recorded;
		e->failed = w->failed;
	}
	w->recorded += statements;
	w->failed = 0;
	return e;
}

/*
 * The round trip ends with its ReadyForQuery, ending at zend in buf, whose
 * transaction status is status (0: not seen): the last record goes out.
 * Statements whose portal was suspended count when PostgreSQL ends them:
 * a resumed portal that completes, here; one a Close or a new unnamed
 * portal drops, or whose transaction commits, in a record of their own;
 * one suspended in a round trip whose transaction ends (autocommit), in
 * this round trip's record. A transaction that aborted drops them
 * uncounted, as pg_stat_statements does.
 */
static __always_inline void pgwire_end(struct task_struct *task, struct task_local *tl, char status, const char *buf,
				       __u64 zend)
{
	struct thread_state *ts = thread_in(tl);
	struct wire *w = &tl->wire;
	__u64 now = bpf_ktime_get_ns(), earlier = 0;
	struct capture *t = NULL;
	struct query_event *e;
	__u32 statements, ended = 0;
	int opens = 0, aborted = 0, fresh;

	w->state = WIRE_IDLE;
	if (!ts || !ts->query_start_ns)
		return;
	/* One statement, unless its portal was suspended; a walked reply's:
	 * those it ended (if the walk lost its place: at least one). */
	statements = (w->flags & (WIRE_EXEC | WIRE_SUSPENDED)) == WIRE_EXEC;
	/* Most round trips run a statement and leave no portal: one test. */
	if (w->open | w->opened | w->resumed | w->bind_pending | (w->flags & (WIRE_SUSPENDED | WIRE_RESUME))) {
		if (!(w->flags & WIRE_WALK)) {
			/* an Execute with a Bind before it, in this round trip or alone in the last */
			fresh = !(w->flags & WIRE_RESUME) || w->bind_pending;
			if (w->flags & WIRE_SUSPENDED) /* fresh, or resumed but opened before we saw it */
				w->opened = fresh || !w->open;
			else if (statements && !fresh)
				w->resumed = 1;
		}
		w->bind_pending = 0;
	}
	if (!statements && !w->done && !(w->flags & WIRE_SUSPENDED)) /* it bound a portal to run later? */
		w->bind_pending = !!(w->flags & (WIRE_NAMED_PORTAL | WIRE_UNNAMED));
	if ((w->flags & WIRE_WALK) || w->done - w->recorded > statements)
		statements = w->done - w->recorded;
	if (w->open | w->opened | w->resumed) {
		if (w->resumed) {
			earlier = portal_take(w, w->resumed);
			w->resumed = 0;
		}
		/* Portals it dropped: one it closed, the unnamed one if it made a new one. */
		if (w->open && (w->flags & (WIRE_CLOSE_PORTAL | WIRE_UNNAMED))) {
			ended = !!(w->flags & WIRE_CLOSE_PORTAL) + ((w->flags & WIRE_UNNAMED) && w->open_unnamed);
			if (w->flags & WIRE_UNNAMED)
				w->open_unnamed = 0;
		}
		if ((w->open || w->opened) && status && status != 'T') { /* the transaction is over */
			aborted = status != 'I' || !tx_committed(buf, zend);
			if (!aborted) {
				statements += w->opened; /* suspended and ended in this round trip */
				ended = w->open;
			}
			w->opened = 0;
			w->flags &= ~WIRE_SUSPENDED; /* no part: its time is its statements' */
		}
		if (ended)
			pgwire_portals_ended(task, w, ended, now);
		if (aborted) { /* the rest were dropped uncounted */
			w->open = w->open_unnamed = 0;
			w->portal_ns = 0;
		}
		opens = w->opened;
	}
	e = pgwire_record(ts, tl, now, statements, statements || (w->flags & WIRE_SUSPENDED), earlier, opens);
	if (opens) {
		w->open += opens;
		w->open_unnamed |= !(w->flags & WIRE_NAMED_PORTAL);
		w->opened = 0;
	}
	if (e || w->next_off) /* only then are the messages needed */
		t = bpf_task_storage_get(&captures, task, 0, 0);
	if (e) {
		e->portals_open = opens ? w->open : 0;
		pgwire_submit(e, w, t);
	}
	if (w->next_off && t) { /* the client sent the next round trip already: it begins now */
		t->part = 0; /* its first messages */
		w->text_off = w->next_off;
		pgwire_begin(tl, t, now);
	}
}

/*
 * Statements ended within the round trip (their replies just went out):
 * a record holding them, and the rest of the round trip goes on as the
 * next record's.
 */
static __always_inline void pgwire_cut(struct task_struct *task, struct task_local *tl)
{
	struct thread_state *ts = thread_in(tl);
	struct wire *w = &tl->wire;
	__u64 now = bpf_ktime_get_ns(), earlier = 0;
	struct query_event *e;

	if (!ts || !ts->query_start_ns)
		return;
	if (w->resumed) {
		earlier = portal_take(w, w->resumed);
		w->resumed = 0;
	}
	e = pgwire_record(ts, tl, now, w->done - w->recorded, 1, earlier, 0);
	if (e)
		pgwire_submit(e, w, bpf_task_storage_get(&captures, task, 0, 0));
	query_begin(ts, &tl->wf, now);
}

/*
 * The backend sent n bytes of a walked round trip's reply from buf: the
 * statements they end make a record (pgwire_cut), its ReadyForQuery the
 * last one (pgwire_end). 0 if the walk lost its place: the round trip then
 * ends at its ReadyForQuery.
 */
static __always_inline int pgwire_reply(struct task_struct *task, struct task_local *tl, const char *buf, __u32 n)
{
	struct wire *w = &tl->wire;
	struct msg_walk rw = { .resumable = !!(w->flags & WIRE_RESUME) };

	if (!msg_walk(&w->out, &rw, (__u64)buf, n))
		return 0;
	w->done += rw.done;
	w->failed += rw.failed;
	w->opened += rw.opened;
	w->resumed += rw.resumed;
	if (rw.suspended)
		w->flags |= WIRE_SUSPENDED;
	if (rw.ready)
		pgwire_end(task, tl, rw.status, buf, rw.off);
	else if (w->done > w->recorded)
		pgwire_cut(task, tl);
	return 1;
}

/* The backend sends ret bytes from buf to its client. */
static __always_inline void pgwire_sent(struct task_struct *task, struct task_local *tl, void *buf, int ret)
{
	struct wire *w = &tl->wire;
	struct reply_tail *rt;
	__u32 zero = 0, n, z;
	char answer;

	if (!buf) {
		stat_inc(STAT_WIRE_UNREADABLE);
		return;
	}
	if (w->state == WIRE_SSL_ASKED) { /* one byte: 'S' or 'G' yes, 'N' no */
		if (bpf_probe_read_user(&answer, 1, buf))
			return;
		w->state = WIRE_NEW; /* the startup packet follows, encrypted or not */
		if (answer == 'S' || answer == 'G')
			pgwire_encrypted(task, w, answer == 'S');
		return;
	}
	if (w->state == WIRE_BUSY && (w->flags & WIRE_WALK)) {
		if (pgwire_reply(task, tl, buf, ret))
			return;
		stat_inc(STAT_WIRE_UNWALKED);
		w->flags &= ~WIRE_WALK;
		w->flags |= WIRE_EXEC;
	}
	/* The tail: a ReadyForQuery, and the message before it. */
	rt = bpf_map_lookup_elem(&reply_tails, &zero);
	n = ret < REPLY_TAIL ? ret : REPLY_TAIL;
	barrier_var(n);
	if (!rt || n < 6 || n > REPLY_TAIL || bpf_probe_read_user(rt->b, n, buf + ret - n))
		return;
	z = n - 6; /* where its ReadyForQuery starts */
	if (!ready_for_query(rt->b + z))
		return;
	switch (w->state) {
	case WIRE_BUSY:
		if (z >= 5 && portal_suspended(rt->b + ((z - 5) & (REPLY_TAIL - 1))))
			w->flags |= WIRE_SUSPENDED;
		w->reply_quiet = reply_quiet(rt->b, z);
		pgwire_end(task, tl, rt->b[z + 5], buf, ret);
		break;
	case WIRE_IDLE:
		stat_inc(STAT_WIRE_UNSEEN);
		break;
	default: /* STARTUP, ATTACHED: from here on in step with the client */
		w->state = WIRE_IDLE;
	}
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(pgwire_send, struct sock *sk, int ret, int flags)
{
	struct task_struct *task;
	struct task_local *tl;
	struct wire *w;

	if (ret <= 0)
		return 0;
	task = bpf_get_current_task_btf();
	tl = pgwire_task(task);
	if (!tl)
		return 0;
	w = &tl->wire;
	if (w->sk != (__u64)sk || w->tls || w->state == WIRE_ENCRYPTED)
		return 0;
	pgwire_sent(task, tl, sock_buf(task), ret);
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
int pgwire_tls_read(struct pt_regs *ctx)
{
	struct task_local *tl = pgwire_task(bpf_get_current_task_btf());

	if (!tl || tl->wire.state == WIRE_OFF)
		return 0;
	if (!tl->wire.tls) {
		tl->wire.tls = 1;
		stat_inc(STAT_WIRE_TLS);
	}
	tl->wire.tls_buf = PT_REGS_PARM2(ctx);
	return 0;
}

SEC("uretprobe")
int pgwire_tls_read_done(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = pgwire_task(task);
	int ret = PT_REGS_RC(ctx);

	if (!tl || !tl->wire.tls || !tl->wire.tls_buf || ret <= 0)
		return 0;
	pgwire_received(task, tl, (void *)tl->wire.tls_buf, ret);
	tl->wire.tls_buf = 0;
	return 0;
}

SEC("uprobe")
int pgwire_tls_write(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = pgwire_task(task);
	int num = PT_REGS_PARM3(ctx);

	if (!tl || !tl->wire.tls || num <= 0)
		return 0;
	pgwire_sent(task, tl, (void *)PT_REGS_PARM2(ctx), num);
	return 0;
}

/*
 * A pooler (pgbouncer) is about to send: ssize_t send(int fd, const void
 * *buf, size_t len, int flags), the C library's, probed in the pooler's
 * process only (pooler.bpf.h says why at its entry).
 */
SEC("uprobe")
int pgwire_pooler_send(struct pt_regs *ctx)
{
	struct task_local *tl = task_local_of(bpf_get_current_task_btf());

	if (tl && tl->kind == PROC_POOLER)
		pooler_sending(PT_REGS_PARM1(ctx), (void *)PT_REGS_PARM2(ctx));
	return 0;
}
