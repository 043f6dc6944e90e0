/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Is a query asleep on a lock? PostgreSQL's lock__wait__start/done and
 * lwlock__wait__start/done USDT probes bracket the waits; MySQL's and
 * MariaDB's thd_wait_begin/thd_wait_end (the thread pool's hooks, called
 * whatever the threading model) bracket theirs and name them. They fire
 * only when a thread actually has to wait, so they cost nothing otherwise.
 * The scheduler hook charges the sleep inside the bracket to its box.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "state.bpf.h"

/* box: what the coming sleeps wait for; 0 when the wait is over. */
static __always_inline int set_waiting(__u8 box)
{
	struct waterfall *wf = waterfall_current();

	if (wf && wf->in_query)
		wf->waiting_for = box;
	return 0;
}

SEC("uprobe")
int lock_wait_start(struct pt_regs *ctx) { return set_waiting(BOX_LOCK); }

SEC("uprobe")
int lock_lwlock_start(struct pt_regs *ctx) { return set_waiting(BOX_LWLOCK); }

SEC("uprobe")
int lock_wait_done(struct pt_regs *ctx) { return set_waiting(0); }

/* MySQL's thd_wait_type values (include/mysql/service_thd_wait.h). */
#define THD_WAIT_DISKIO 2
#define THD_WAIT_ROW_LOCK 3
#define THD_WAIT_GLOBAL_LOCK 4
#define THD_WAIT_META_DATA_LOCK 5
#define THD_WAIT_TABLE_LOCK 6
#define THD_WAIT_USER_LOCK 7
#define THD_WAIT_BINLOG 8
#define THD_WAIT_GROUP_COMMIT 9
#define THD_WAIT_SYNC 10
#define THD_WAIT_MAX 0xff

static __always_inline __u8 thd_wait_box(int type)
{
	switch (type) {
	case THD_WAIT_ROW_LOCK:
	case THD_WAIT_GLOBAL_LOCK:
	case THD_WAIT_META_DATA_LOCK:
	case THD_WAIT_TABLE_LOCK:
	case THD_WAIT_USER_LOCK:
		return BOX_LOCK;
	case THD_WAIT_DISKIO:
	case THD_WAIT_BINLOG:
	case THD_WAIT_GROUP_COMMIT:
	case THD_WAIT_SYNC:
		return BOX_IO_WAIT;
	}
	return BOX_OTHER_WAIT; /* sleep, network */
}

/* void thd_wait_begin(THD *thd, int type), in the thread that waits. */
SEC("uprobe")
int lock_thd_wait_begin(struct pt_regs *ctx)
{
	struct waterfall *wf = waterfall_current();
	int type = (int)PT_REGS_PARM2(ctx);

	if (!wf || !wf->in_query || type <= 0 || type > THD_WAIT_MAX)
		return 0;
	wf->waiting_for = thd_wait_box(type);
	wf->bracket_event = WAIT_CLASS_MYSQL | type;
	return 0;
}

SEC("uprobe")
int lock_thd_wait_end(struct pt_regs *ctx)
{
	struct waterfall *wf = waterfall_current();

	if (wf) {
		wf->waiting_for = 0;
		wf->bracket_event = 0;
	}
	return 0;
}
