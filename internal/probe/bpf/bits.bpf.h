/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
#ifndef BITS_BPF_H
#define BITS_BPF_H

/*
 * The log2 slot of a value: 0 for v < 2, else floor(log2(v)), so slot i holds
 * [2^i, 2^(i+1)). internal/hist.Slot is the Go twin; a test checks they agree.
 */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

#endif /* BITS_BPF_H */
