package session

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Capabilities, by bit (linux/capability.h).
const (
	capDacOverride   = 1
	capDacReadSearch = 2
	capSetpcap       = 8
	capSysPtrace     = 19
	capSysAdmin      = 21
	capPerfmon       = 38
	capBPF           = 39
)

// CheckPrivileges says in one sentence what is missing to trace. CAP_BPF
// and CAP_PERFMON load and attach the programs; the others are asked for
// where they are used: CAP_SYS_PTRACE to read which binary a server of
// another user runs, CAP_SYS_ADMIN for uprobes before Linux 6.6, mounting
// tracefs and the kernel's count of our programs' run time.
func CheckPrivileges() error {
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("cannot read this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}} {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dbiolat needs root or the capabilities CAP_BPF and CAP_PERFMON (missing %s): run it with sudo", strings.Join(missing, ", "))
	}
	return nil
}

// keptCaps are what a trace still uses once attached: CAP_PERFMON and
// CAP_SYS_PTRACE to attach to a server that restarts, CAP_SYS_ADMIN for
// the windows in which the kernel counts BPF run time, and file access
// (CAP_DAC_*) for the recording that SQLite finishes at exit.
const keptCaps = 1<<capPerfmon | 1<<capSysPtrace | 1<<capSysAdmin | 1<<capDacOverride | 1<<capDacReadSearch

// DropPrivileges gives up, in every thread and for good, the capabilities
// a running trace no longer uses: CAP_BPF (no program is loaded or
// attached after attaching, unless reattach: duty cycles attach again)
// and everything else but keptCaps.
func DropPrivileges(reattach bool) error {
	kept := uint64(keptCaps)
	if reattach {
		kept |= 1 << capBPF
	}
	eff, err := effectiveCaps()
	if err != nil {
		return err
	}
	// The bounding set first, while CAP_SETPCAP (if we have it) allows it.
	if eff&(1<<capSetpcap) != 0 {
		last, err := lastCap()
		if err != nil {
			return err
		}
		for c := uintptr(0); c <= last; c++ {
			if kept&(1<<c) != 0 {
				continue
			}
			if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); e != 0 {
				return dropError(e)
			}
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 {
		return dropError(e)
	}
	keep := eff & kept
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(keep), Permitted: uint32(keep)},
		{Effective: uint32(keep >> 32), Permitted: uint32(keep >> 32)},
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return dropError(e)
	}
	return nil
}

func dropError(e syscall.Errno) error {
	if e == syscall.ENOTSUP {
		return errors.New("cannot drop capabilities in a build with cgo: build dbiolat with CGO_ENABLED=0 (make build does)")
	}
	return fmt.Errorf("dropping capabilities: %w", e)
}

func lastCap() (uintptr, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return uintptr(n), err
}

func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}

// TracefsDir is where syscall tracepoints are looked up.
const TracefsDir = "/sys/kernel/tracing"

// EnsureTracefs mounts tracefs when it is missing, as a fresh machine may
// not have it; it reports whether it had to.
func EnsureTracefs() (mounted bool, err error) {
	if _, err := os.Stat(TracefsDir + "/events"); err == nil {
		return false, nil
	}
	if err := syscall.Mount("nodev", TracefsDir, "tracefs", 0, ""); err != nil {
		return false, fmt.Errorf("tracefs is not mounted and mounting it failed (%v): run mount -t tracefs nodev %s", err, TracefsDir)
	}
	return true, nil
}

// CheckBTF says whether the kernel describes its own types, which the
// tp_btf programs need.
func CheckBTF() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return errors.New("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): dbiolat needs a kernel built with CONFIG_DEBUG_INFO_BTF=y")
	}
	return nil
}
