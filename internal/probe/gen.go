package probe

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target amd64 -type query_event -type proc_run -type query_acct -type io_acct -type proc_io -type blk_key -type blk_io -type hist -type proc_info -type usdt_spec -type usdt_arg -type usdt_arg_kind -type stat_id -type fs_op -type blk_op -type blk_owner -type hist_id -type box -type task_local -type wait_time -type wait_key -type unit_hist_key -type proc_flag -type proc_kind -type text_kind -type emit_flag -type wire_state -type wait_class dbiolat bpf/dbiolat.bpf.c -- -I./bpf
