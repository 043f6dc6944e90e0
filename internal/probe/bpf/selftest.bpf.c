/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Not attached anywhere: run by tests through BPF_PROG_TEST_RUN so the
 * kernel's log2 slot and Go's hist.Slot are checked against each other.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "bits.bpf.h"

SEC("syscall")
int selftest_log2_slot(__u64 *v)
{
	return log2_slot(*v);
}
