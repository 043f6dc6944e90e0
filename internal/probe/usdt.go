package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/dbiolat/dbiolat/internal/usdt"
)

// USDTProbes names the probes of a database binary that mark a query and
// its lock waits. The lock probes are optional: without them lock waits
// count as other waits.
type USDTProbes struct {
	Provider                string
	QueryStart, QueryDone   string
	LockStart, LockDone     string
	LWLockStart, LWLockDone string
	BufferReadDone          string // attached only with Buffers
}

// ErrNoProbe says a binary lacks a USDT probe we need.
var ErrNoProbe = errors.New("probe missing")

// AttachUSDT attaches the probes the families need at every site in the
// binary: the query probes with USDT, the buffer probe with Buffers, and
// the lock probes whenever the binary has them. The kernel attaches by
// inode, so all processes running the binary, now and later, are covered;
// a binary already attached is skipped. It returns the number of sites
// attached.
func (t *Tracer) AttachUSDT(binary string, p USDTProbes) (int, error) {
	key, err := attachment(binary, "usdt")
	if err != nil || t.binaries[key] {
		return 0, err
	}
	probes, err := usdt.Open(binary)
	if err != nil {
		return 0, err
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", binary, err)
	}
	o := &t.objs
	n := 0
	for _, w := range []struct {
		name string
		prog *ebpf.Program
		// required: a probe whose arguments are read, which the family
		// cannot do without; the lock probes only bracket waits.
		family   Families
		required bool
	}{
		{p.QueryStart, o.UsdtQueryStart, USDT, true}, {p.QueryDone, o.UsdtQueryDone, USDT, true},
		{p.LockStart, o.LockWaitStart, 0, false}, {p.LockDone, o.LockWaitDone, 0, false},
		{p.LWLockStart, o.LockLwlockStart, 0, false}, {p.LWLockDone, o.LockWaitDone, 0, false},
		{p.BufferReadDone, o.BuffersReadDone, Buffers, true},
	} {
		if w.family != 0 && t.families&w.family == 0 {
			continue
		}
		sites := usdt.Find(probes, p.Provider, w.name)
		if len(sites) == 0 && w.required {
			return n, fmt.Errorf("%s has no USDT probe %s:%s: %w", binary, p.Provider, w.name, ErrNoProbe)
		}
		var usable []usdt.Probe
		for _, site := range sites {
			if site.ArgErr == nil || w.required { // only the required probes read arguments
				usable = append(usable, site)
			}
		}
		if err := t.attachSites(ex, usable, w.prog); err != nil {
			return n, fmt.Errorf("attaching USDT %s:%s in %s: %w", p.Provider, w.name, binary, err)
		}
		n += len(usable)
	}
	t.binaries[key] = true
	return n, nil
}

// attachSites attaches prog at the sites of one probe, each with the
// cookie that names its argument spec in usdt_specs.
func (t *Tracer) attachSites(ex *link.Executable, sites []usdt.Probe, prog *ebpf.Program) error {
	if len(sites) == 0 {
		return nil
	}
	var multi link.UprobeMultiOptions
	for _, site := range sites {
		spec, err := specOf(site.Args)
		if err != nil {
			return err
		}
		cookie := t.specs
		if err := t.objs.UsdtSpecs.Update(cookie, spec, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("storing the argument spec (too many sites?): %w", err)
		}
		t.specs++
		if t.uprobeMulti {
			multi.Addresses = append(multi.Addresses, site.Location)
			multi.RefCtrOffsets = append(multi.RefCtrOffsets, site.Semaphore) // 0: none
			multi.Cookies = append(multi.Cookies, uint64(cookie))
			continue
		}
		opts := &link.UprobeOptions{Address: site.Location, RefCtrOffset: site.Semaphore, Cookie: uint64(cookie)}
		if err := t.attach(prog, false, func() (link.Link, error) { return ex.Uprobe("", prog, opts) }); err != nil {
			return err
		}
	}
	if t.uprobeMulti {
		return t.attach(prog, false, func() (link.Link, error) { return ex.UprobeMulti(nil, prog, &multi) })
	}
	return nil
}

// specOf turns decoded USDT arguments into what usdt.bpf.h reads.
func specOf(args []usdt.Arg) (dbiolatUsdtSpec, error) {
	var s dbiolatUsdtSpec
	if len(args) > len(s.Args) {
		return s, fmt.Errorf("%d arguments, at most %d supported", len(args), len(s.Args))
	}
	for i, a := range args {
		b := &s.Args[i]
		switch a.Kind {
		case usdt.ArgConst:
			b.Kind = uint8(dbiolatUsdtArgKindUSDT_ARG_CONST)
		case usdt.ArgReg:
			b.Kind = uint8(dbiolatUsdtArgKindUSDT_ARG_REG)
		case usdt.ArgRegDeref:
			b.Kind = uint8(dbiolatUsdtArgKindUSDT_ARG_REG_DEREF)
		default:
			return s, fmt.Errorf("argument %d: unknown kind %v", i, a.Kind)
		}
		b.ValOff = a.Value
		b.RegOff = uint16(a.RegOffset)
		b.Bitshift = uint8(64 - 8*a.Size)
		if a.Signed {
			b.IsSigned = 1
		}
	}
	s.Nargs = uint32(len(args))
	return s, nil
}
