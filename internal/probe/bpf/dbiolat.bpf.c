/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One object, one file per question. The families share the per-thread
 * state (maps.bpf.h), so they are compiled together; Go attaches only the
 * families a command needs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "maps.bpf.h"
#include "usdt.bpf.h"

#define S_IFMT 00170000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define PF_KTHREAD 0x00200000

#include "proc.bpf.c"
#include "query.bpf.c"
#include "wire.bpf.c"
#include "fsio.bpf.c"
#include "block.bpf.c"
#include "sched.bpf.c"
#include "lock.bpf.c"
#include "pagecache.bpf.c"
#include "buffers.bpf.c"
#include "selftest.bpf.c"

/* Types Go reads but no program names: named here so that BTF, and so bpf2go, has them. */
const struct proc_run *unused_proc_run __attribute__((unused));
const enum text_kind *unused_text_kind __attribute__((unused));
const enum emit_flag *unused_emit_flag __attribute__((unused));
const enum wire_state *unused_wire_state __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
