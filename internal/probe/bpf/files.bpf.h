/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The file behind a file descriptor of the current task, for the
 * syscall tracepoints, which see only the descriptor.
 */
#ifndef FILES_BPF_H
#define FILES_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>

#define S_IFMT 00170000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define S_IFCHR 0020000
#define S_IFSOCK 0140000

static __always_inline struct file *file_of(int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file **fds, *f;

	fds = BPF_CORE_READ(task, files, fdt, fd);
	if (fd < 0 || (unsigned int)fd >= BPF_CORE_READ(task, files, fdt, max_fds))
		return NULL;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]))
		return NULL;
	return f;
}

/* The kind of file it is (S_IFREG...), 0 if none. */
static __always_inline umode_t file_type(struct file *f)
{
	return f ? BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT : 0;
}

#endif /* FILES_BPF_H */
