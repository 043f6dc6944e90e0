package mysql

import "fmt"

// The functions with which MySQL and MariaDB bracket a thread's waits:
// void thd_wait_begin(THD *, int type) and void thd_wait_end(THD *). They
// are the thread pool's hooks, called in every threading model, by the
// thread that waits: a row lock in InnoDB, a metadata lock, a group
// commit. Both servers export them, under these symbols: MariaDB's with C
// linkage, MySQL's (8.0 and later: 9.7 checked) as C++ functions, mangled.
var WaitSymbols = [][2]string{
	{"thd_wait_begin", "thd_wait_end"},
	{"_Z14thd_wait_beginP3THDi", "_Z12thd_wait_endP3THD"},
}

// waitNames names thd_wait_begin's types (include/mysql/service_thd_wait.h)
// the way PostgreSQL's wait events are named, class/event, so that both
// read alike in one output.
var waitNames = map[byte]string{
	1:  "Timeout/Sleep",
	2:  "IO/DiskIO",
	3:  "Lock/RowLock",
	4:  "Lock/GlobalReadLock",
	5:  "Lock/MetadataLock",
	6:  "Lock/TableLock",
	7:  "Lock/UserLock",
	8:  "IO/Binlog",
	9:  "IO/GroupCommit",
	10: "IO/Sync",
	11: "Client/Net",
}

// WaitName names a thd_wait_begin type.
func WaitName(typ byte) string {
	if n, ok := waitNames[typ]; ok {
		return n
	}
	return fmt.Sprintf("Wait/%d", typ)
}

// The two ends of InnoDB's simulated AIO (innodb_use_native_aio off, or
// io_setup refused, as in a container), as MySQL 8.0 and later export
// them (C++, mangled; 9.7 checked): a query's thread queues a page read
// with fil_io, one of InnoDB's read I/O threads performs it with
// SyncFileIO::execute. The probes charge the read to the query (aio.bpf.c).
const (
	InnoDBQueueRead   = "_Z6fil_ioRK9IORequestbRK9page_id_tRK11page_size_tmmPvS8_"
	InnoDBPerformRead = "_ZN10SyncFileIO7executeERK9IORequest"
)
