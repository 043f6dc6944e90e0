package loadgen

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The io_uring ABI (linux/io_uring.h), the little of it one read needs.
const (
	sysIOUringSetup = 425
	sysIOUringEnter = 426

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	opRead        = 22     // IORING_OP_READ
	sqeAsync      = 1 << 4 // IOSQE_ASYNC: performed by an io-wq worker thread (iou-wrk-PID)
	enterGetEvent = 1      // IORING_ENTER_GETEVENTS
)

type sqRingOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqRingOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type ioUringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqRingOffsets
	cqOff                                                                  cqRingOffsets
}

type sqe struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len, rwFlags  uint32
	userData      uint64
	pad           [3]uint64
}

type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// readWithIOUring reads a whole file as a database with io_method=io_uring
// would have a read done for it: queued to a ring of its own and, forced
// asynchronous, performed by the kernel's io-wq worker thread of the
// process (iou-wrk-PID), not by the thread that queued it.
func readWithIOUring(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var p ioUringParams
	fd, _, errno := unix.Syscall(sysIOUringSetup, 1, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("io_uring_setup: %w", errno)
	}
	defer unix.Close(int(fd))
	sqRing, err := unix.Mmap(int(fd), offSQRing, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("mapping the submission ring: %w", err)
	}
	defer unix.Munmap(sqRing)
	cqRing, err := unix.Mmap(int(fd), offCQRing, int(p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{}))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("mapping the completion ring: %w", err)
	}
	defer unix.Munmap(cqRing)
	sqes, err := unix.Mmap(int(fd), offSQEs, int(p.sqEntries*uint32(unsafe.Sizeof(sqe{}))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, fmt.Errorf("mapping the submission entries: %w", err)
	}
	defer unix.Munmap(sqes)
	u32 := func(ring []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&ring[off])) }

	buf := make([]byte, st.Size())
	*(*sqe)(unsafe.Pointer(&sqes[0])) = sqe{opcode: opRead, flags: sqeAsync, fd: int32(f.Fd()),
		addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf)), userData: 1}
	tail := atomic.LoadUint32(u32(sqRing, p.sqOff.tail))
	*u32(sqRing, p.sqOff.array+(tail&*u32(sqRing, p.sqOff.ringMask))*4) = 0
	atomic.StoreUint32(u32(sqRing, p.sqOff.tail), tail+1)
	if _, _, errno := unix.Syscall6(sysIOUringEnter, fd, 1, 1, enterGetEvent, 0, 0); errno != 0 {
		return 0, fmt.Errorf("io_uring_enter: %w", errno)
	}
	head := atomic.LoadUint32(u32(cqRing, p.cqOff.head))
	c := (*cqe)(unsafe.Pointer(&cqRing[p.cqOff.cqes+(head&*u32(cqRing, p.cqOff.ringMask))*uint32(unsafe.Sizeof(cqe{}))]))
	res := c.res
	atomic.StoreUint32(u32(cqRing, p.cqOff.head), head+1)
	if res < 0 {
		return 0, fmt.Errorf("reading %s through io_uring: %w", path, unix.Errno(-res))
	}
	return int(res), nil
}
