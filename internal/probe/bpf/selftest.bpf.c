/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Not attached anywhere: run by tests through BPF_PROG_TEST_RUN so the
 * kernel's pure functions are checked against Go's twins: the log2 slot
 * against hist.Slot, a statement text's identity hash against the test's
 * reference.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "bits.bpf.h"
#include "sock.bpf.h"

SEC("syscall")
int selftest_log2_slot(__u64 *v)
{
	return log2_slot(*v);
}

/* The text to hash, in a capture's place (stmt_text reads one), and its hash back. */
struct selftest_text {
	__u32 off, end, skip, len;
	__u64 hash;
	char buf[QUERY_TEXT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct capture);
} selftest_capture SEC(".maps");

SEC("syscall")
int selftest_stmt_text(struct selftest_text *in)
{
	__u32 zero = 0;
	struct capture *t = bpf_map_lookup_elem(&selftest_capture, &zero);

	if (!t || bpf_probe_read_kernel(t->buf, sizeof(t->buf), in->buf))
		return 1;
	t->len = in->len;
	in->hash = stmt_text(t, in->off, in->end, in->skip);
	return 0;
}
