/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Not attached anywhere: run by tests through BPF_PROG_TEST_RUN so the
 * kernel's log2 slot and Go's hist.Slot are checked against each other.
 */

SEC("syscall")
int log2_slot_of(__u64 *v)
{
	return log2_slot(*v);
}
