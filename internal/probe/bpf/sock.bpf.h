/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the client-protocol families share (pgwire.bpf.c for PostgreSQL,
 * mysql.bpf.c for MySQL and MariaDB): the user buffer of the socket call
 * in progress, and the bytes a query began with, copied from it.
 *
 * The socket calls' user buffers are found from the syscall's registers:
 * x86-64 only (bpf2go -target amd64).
 */
#ifndef SOCK_BPF_H
#define SOCK_BPF_H

#include "query.bpf.h"

#define MSG_PEEK 2
#define TEXT_MASK (QUERY_TEXT_MAX - 1)

/* x86_64 syscall numbers: the socket calls whose buffer we can find. */
#define NR_READ 0
#define NR_WRITE 1
#define NR_SENDTO 44
#define NR_RECVFROM 45
#define NR_SENDMSG 46
#define NR_RECVMSG 47

/* The bytes a query began with, per thread that runs queries. */
struct capture {
	__u32 len;       /* bytes captured */
	__u32 truncated; /* mysql.bpf.c: the command was longer (pgwire.bpf.c keeps its own flag) */
	/* pgwire.bpf.c: a round trip's request is read in parts (a read may hold
	 * twice what a capture holds), and Go joins a message cut between two */
	__u32 part;      /* the bytes are a later part of the request: its first text_off end a message */
	__u32 at;        /* where buf starts in the bytes the backend read since its round trip began */
	__u32 walked;    /* those bytes read so far */
	char buf[QUERY_TEXT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct capture);
} captures SEC(".maps");

/*
 * The user buffer of the socket call in progress: the syscall's own
 * argument; and, if asked (size), the bytes the call asked for.
 */
static __always_inline void *sock_buf_size(struct task_struct *task, __u64 *size)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct user_msghdr msg;
	struct iovec iov;

	switch (regs->orig_ax) {
	case NR_READ:
	case NR_WRITE:
	case NR_RECVFROM:
	case NR_SENDTO:
		if (size) {
			__u64 dx = regs->dx;

			barrier_var(dx); /* a load of its own: clang would share one with iov_len's, through two kinds of pointer */
			*size = dx;
		}
		return (void *)regs->si;
	case NR_RECVMSG:
	case NR_SENDMSG:
		if (bpf_probe_read_user(&msg, sizeof(msg), (void *)regs->si) ||
		    msg.msg_iovlen != 1 || bpf_probe_read_user(&iov, sizeof(iov), msg.msg_iov))
			return NULL;
		if (size)
			*size = iov.iov_len;
		return iov.iov_base;
	}
	return NULL;
}

static __always_inline void *sock_buf(struct task_struct *task)
{
	return sock_buf_size(task, NULL);
}

/* n, at most TEXT_MASK, bounded where the verifier can see it. */
static __always_inline __u32 text_bound(__u64 n)
{
	if (n > TEXT_MASK)
		n = TEXT_MASK;
	barrier_var(n); /* keep the mask: clang would pass an unbounded copy */
	return n & TEXT_MASK;
}

/* n, at most QUERY_TEXT_MAX (a whole capture), bounded where the verifier can see it. */
static __always_inline __u32 capture_bound(__u64 n)
{
	if (!n)
		return 0;
	if (n > QUERY_TEXT_MAX)
		n = QUERY_TEXT_MAX;
	barrier_var(n);
	return ((n - 1) & TEXT_MASK) + 1;
}

/*
 * A statement's identity from its text, for a server that names it by no
 * id of its own (MySQL; PostgreSQL without query ids): a hash of the text
 * at [off, end) of t (to a NUL) without its literals, so the statement run
 * with other values is the same identity: numbers not part of a name, the
 * insides of quoted strings (one mark each), runs of white space (one
 * space). skip: NUL-terminated strings before it (a Parse's statement
 * name). Hashes STMT_TEXT_HASHED bytes, and the length of a longer text.
 * Two statements Go normalizes alike may differ here (a list's length, an
 * escaped quote), never the other way round: each identity one fingerprint.
 */
struct text_hash {
	struct capture *t;
	__u32 off, end;
	__u64 h;
	__u8 skip, quote, word, space, done;
};

#define TEXT_HASH_STRIDE 8 /* bytes a callback takes: a callback's call costs more than a byte's work */

static long text_hash_step(__u32 i, void *ctx)
{
	struct text_hash *s = ctx;
	/* The state in registers for the stride, written back once. */
	__u32 off = s->off, end = s->end;
	__u64 h = s->h;
	__u8 skip = s->skip, quote = s->quote, word = s->word, space = s->space, c;
	long stop = 0;
	int k;

#pragma unroll
	for (k = 0; k < TEXT_HASH_STRIDE; k++) {
		if (off >= end) {
			s->done = 1;
			stop = 1;
			break;
		}
		c = s->t->buf[off++ & TEXT_MASK];
		if (skip) {
			skip -= !c;
			continue;
		}
		if (!c) {
			s->done = 1;
			stop = 1;
			break;
		}
		if (quote) {
			quote = c != '\'';
			continue;
		}
		if (c == '\'') {
			quote = 1;
			c = '?';
		} else if (c >= '0' && c <= '9' && !word) {
			continue;
		} else if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
			space = 1;
			word = 0;
			continue;
		}
		if (space)
			h = (h ^ ' ') * FNV_PRIME;
		space = 0;
		word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		       c == '$' || c >= 0x80;
		h = (h ^ c) * FNV_PRIME;
	}
	s->off = off;
	s->h = h;
	s->skip = skip;
	s->quote = quote;
	s->word = word;
	s->space = space;
	return stop;
}

__noinline __u64 stmt_text(struct capture *t, __u32 off, __u32 end, __u32 skip)
{
	struct text_hash s = { .t = t, .off = off, .end = end, .h = FNV_OFFSET, .skip = skip };

	if (!t)
		return 0;
	if (s.end > t->len)
		s.end = t->len;
	bpf_loop((STMT_TEXT_HASHED + 64) / TEXT_HASH_STRIDE, text_hash_step, &s, 0);
	if (!s.done) /* longer than hashed: its length tells more */
		s.h = (s.h ^ (end - off)) * FNV_PRIME;
	return s.h | 1;
}

#endif /* SOCK_BPF_H */
