/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading USDT arguments. Each attached site carries a cookie: the index of
 * its usdt_spec, which Go decoded from the note's argument string
 * (internal/usdt). One probe may have several sites with different specs.
 */
#ifndef USDT_BPF_H
#define USDT_BPF_H

#include "dbiolat.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct usdt_spec);
} usdt_specs SEC(".maps");

/* Argument n of the current USDT site into *res; 0 on success. */
static __always_inline int usdt_arg(struct pt_regs *ctx, __u32 n, __s64 *res)
{
	__u32 id = (__u32)bpf_get_attach_cookie(ctx);
	struct usdt_spec *spec = bpf_map_lookup_elem(&usdt_specs, &id);
	struct usdt_arg *arg;
	__u64 val = 0;

	if (!spec || n >= USDT_MAX_ARGS || n >= spec->nargs)
		return -1;
	arg = &spec->args[n];
	switch (arg->kind) {
	case USDT_ARG_CONST:
		val = arg->val_off;
		break;
	case USDT_ARG_REG:
		if (arg->reg_off > sizeof(struct pt_regs) - sizeof(val))
			return -1;
		if (bpf_probe_read_kernel(&val, sizeof(val), (void *)ctx + arg->reg_off))
			return -1;
		break;
	case USDT_ARG_REG_DEREF:
		if (arg->reg_off > sizeof(struct pt_regs) - sizeof(val))
			return -1;
		if (bpf_probe_read_kernel(&val, sizeof(val), (void *)ctx + arg->reg_off))
			return -1;
		if (bpf_probe_read_user(&val, sizeof(val), (void *)val + arg->val_off))
			return -1;
		break;
	default:
		return -1;
	}
	/* Keep only the argument's bytes; sign-extend when the spec says so. */
	val <<= arg->bitshift;
	if (arg->is_signed)
		*res = ((__s64)val) >> arg->bitshift;
	else
		*res = val >> arg->bitshift;
	return 0;
}

#endif /* USDT_BPF_H */
