/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one object bpf2go compiles: every family's source, each of which
 * includes what it needs and compiles on its own too (TestSourcesCompileAlone).
 * They are one object because they share the per-thread state
 * (state.bpf.h); Go loads only the families a command needs.
 */
#include "proc.bpf.c"
#include "query.bpf.c"
#include "pgwire.bpf.c"
#include "mysql.bpf.c"
#include "fsio.bpf.c"
#include "pagecache.bpf.c"
#include "block.bpf.c"
#include "sched.bpf.c"
#include "lock.bpf.c"
#include "aio.bpf.c"
#include "fuse.bpf.c"
#include "buffers.bpf.c"
#include "selftest.bpf.c"

/* Types Go reads but no program names: named here so that BTF, and so bpf2go, has them. */
const struct proc_run *unused_proc_run __attribute__((unused));
const enum text_kind *unused_text_kind __attribute__((unused));
const enum emit_flag *unused_emit_flag __attribute__((unused));
const enum wire_state *unused_wire_state __attribute__((unused));
const enum box *unused_box __attribute__((unused));
const enum proc_flag *unused_proc_flag __attribute__((unused));
const enum proc_kind *unused_proc_kind __attribute__((unused));
const enum usdt_arg_kind *unused_usdt_arg_kind __attribute__((unused));
const enum wait_class *unused_wait_class __attribute__((unused));
const enum stmt_size *unused_stmt_size __attribute__((unused));
const enum stmt_kind *unused_stmt_kind __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
