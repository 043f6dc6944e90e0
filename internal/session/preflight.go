package session

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Capabilities the kernel wants for loading tracing programs and uprobes.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges says in one sentence what is missing to trace.
func CheckPrivileges() error {
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("cannot read this process's capabilities: %w", err)
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}, {capSysAdmin, "CAP_SYS_ADMIN"}} {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("dbiolat needs root or the capabilities CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (missing %s): run it with sudo", strings.Join(missing, ", "))
	}
	return nil
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
