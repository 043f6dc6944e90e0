/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --usdt: queries from PostgreSQL's own probes query__start/query__done,
 * one uprobe trap each. They fire for simple-protocol queries only, but
 * also on encrypted connections.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "query.bpf.h"
#include "usdt.bpf.h"

SEC("uprobe")
int usdt_query_start(struct pt_regs *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct task_local *tl = task_local_of(task);
	struct thread_state *ts = thread_in(tl);

	if (ts)
		query_begin(ts, &tl->wf, bpf_ktime_get_ns());
	return 0;
}

SEC("uprobe")
int usdt_query_done(struct pt_regs *ctx)
{
	struct thread_state *ts = thread_current();
	struct query_ending how = {.statements = 1, .timed = 1, .single = 1};
	struct query_event *e;
	__s64 text = 0;
	long n = 0;

	if (!ts || !ts->query_start_ns) /* started before we attached */
		return 0;
	if (count_statements)
		stmt_query_id(&how.stmt, NULL);
	e = query_end(ts, waterfall_current(), bpf_ktime_get_ns(), how);
	if (!e)
		return 0;
	e->text_kind = TEXT_SQL;
	if (usdt_arg(ctx, 0, &text) == 0)
		n = bpf_probe_read_user_str(e->text, sizeof(e->text), (void *)text);
	else
		stat_inc(STAT_USDT_ARG_FAULT);
	if (n <= 0) {
		stat_inc(STAT_QUERY_TEXT_FAULT);
		n = 1;
		e->text[0] = 0;
	}
	query_submit(e, n - 1, n == sizeof(e->text));
	return 0;
}
