package probe

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Hook is a kernel hook one of our programs attaches to, read from the
// program's section name: "tp_btf/NAME" or "tracepoint/GROUP/NAME".
// (Programs in "uprobe" sections go to USDT sites: usdt.go.)
type Hook struct {
	Program string
	Group   string // the tracepoint's group ("syscalls"); "" for a BTF tracepoint
	Name    string // "sys_enter_pread64", "sock_recv_length"
}

func hookOf(name string, ps *ebpf.ProgramSpec) (Hook, bool) {
	if tp, ok := strings.CutPrefix(ps.SectionName, "tp_btf/"); ok {
		return Hook{Program: name, Name: tp}, true
	}
	if tp, ok := strings.CutPrefix(ps.SectionName, "tracepoint/"); ok {
		group, tp, _ := strings.Cut(tp, "/")
		return Hook{Program: name, Group: group, Name: tp}, true
	}
	return Hook{}, false
}

// String names the hook as bpftrace does: "tracepoint:syscalls:sys_enter_read", "rawtracepoint:sched_switch".
func (h Hook) String() string {
	if h.Group == "" {
		return "rawtracepoint:" + h.Name
	}
	return "tracepoint:" + h.Group + ":" + h.Name
}

// Hooks lists the kernel hooks the families' programs (and the core's)
// attach to, in program name order.
func Hooks(f Families) ([]Hook, error) {
	spec, err := spec()
	if err != nil {
		return nil, err
	}
	return hooks(spec, f), nil
}

func hooks(spec *ebpf.CollectionSpec, f Families) []Hook {
	var out []Hook
	for name, ps := range spec.Programs {
		if h, ok := hookOf(name, ps); ok && f.uses(name) {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Program < out[j].Program })
	return out
}

// attachHooks attaches the families' programs that have a kernel hook,
// and the core's with them.
func (t *Tracer) attachHooks(f Families, core bool) error {
	progs := byName[*ebpf.Program](&t.objs.dbiolatPrograms)
	for _, h := range hooks(t.spec, f) {
		if fam, _ := familyOf(h.Program); fam == 0 && !core {
			continue
		}
		prog := progs[h.Program]
		err := t.attach(prog, strings.HasPrefix(h.Program, steadyPrefix), func() (link.Link, error) {
			if h.Group == "" {
				return link.AttachTracing(link.TracingOptions{Program: prog})
			}
			return link.Tracepoint(h.Group, h.Name, prog, nil)
		})
		if err != nil {
			return fmt.Errorf("attaching %s to %s: %w", h.Program, h, err)
		}
	}
	return nil
}

// Wake loads the dormant families (Load) and attaches their hooks; those
// attached already are left as they are. Their programs use the maps
// loaded already: one state, whichever program keeps it.
func (t *Tracer) Wake(f Families) error {
	if f &= t.dormant; f == 0 {
		return nil
	}
	shared := byName[*ebpf.Map](&t.objs.dbiolatMaps)
	for name, m := range t.data.Maps {
		shared[name] = m
	}
	coll, err := t.load(t.spec.Copy(), f, false, shared)
	if err != nil {
		return err
	}
	coll.Close() // the clones of the shared maps
	t.dormant &^= f
	t.families |= f
	return t.attachHooks(f, false)
}

// Attached are the families whose hooks are attached (or paused).
func (t *Tracer) Attached() Families { return t.families }

// steadyPrefix names the programs that stay attached while tracing
// pauses: process tracking (fork, exec, exit), rare and cheap, so that
// the traced processes and threads are still known when it resumes.
const steadyPrefix = "proc_"

// hookLink is one program attached to one hook, made again by its
// recipe when tracing resumes after a pause.
type hookLink struct {
	make   func() (link.Link, error)
	link   link.Link // nil while paused
	steady bool      // stays attached during pauses
}

// attach makes a program's link and keeps its recipe. While tracing is
// paused it is made (so a missing symbol is said now) and closed again.
func (t *Tracer) attach(prog *ebpf.Program, steady bool, make func() (link.Link, error)) error {
	l, err := make()
	if err != nil {
		return err
	}
	a := &hookLink{make: make, link: l, steady: steady}
	if t.paused && !steady {
		err = l.Close()
		a.link = nil
	}
	t.attached = append(t.attached, a)
	t.progs[prog] = true
	return err
}

// Pause detaches every hook but process tracking's: the programs stop
// costing anything. Their maps keep what they counted.
func (t *Tracer) Pause() error {
	// The window closes now, though the hooks take a second to come off.
	if err := t.objs.TracedUntilNs.Set(monotonicNow()); err != nil {
		return fmt.Errorf("setting traced_until_ns: %w", err)
	}
	var closing []link.Link
	for _, a := range t.attached {
		if !a.steady && a.link != nil {
			closing = append(closing, a.link)
			a.link = nil
		}
	}
	t.paused = true
	return closeAll(closing)
}

// closeAll closes links at once: the kernel waits for an RCU grace period
// to detach each (some 50 ms here), so one after the other, 50 hooks
// would take seconds to come off, still running meanwhile.
func closeAll(links []link.Link) error {
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Paused says whether the hooks are detached (between Pause and Resume).
func (t *Tracer) Paused() bool { return t.paused }

// Resume attaches again what Pause detached, then opens the traced
// window (traced_since_ns, then traced_until_ns cleared): whatever began
// before it, while the hooks were off or coming back one by one, is left
// out rather than measured in part (a query whose switches the scheduler
// hook, not yet back, missed; the attaching's own disturbance, kernel
// text patched on every CPU): queries (counted in query_cut), syscalls,
// block requests, sleeps. The protocol parsers resync at each
// connection's next message from the first hook on (resync_ns).
func (t *Tracer) Resume() error {
	if err := t.objs.ResyncNs.Set(monotonicNow()); err != nil {
		return fmt.Errorf("setting resync_ns: %w", err)
	}
	var errs []error
	for _, a := range t.attached {
		if a.link == nil {
			l, err := a.make()
			errs = append(errs, err) // tried again at the next resume
			a.link = l
		}
	}
	if err := t.objs.TracedSinceNs.Set(monotonicNow()); err != nil {
		return fmt.Errorf("setting traced_since_ns: %w", err)
	}
	if err := t.objs.TracedUntilNs.Set(uint64(0)); err != nil { // after since: a span begun while attaching stays out
		return fmt.Errorf("setting traced_until_ns: %w", err)
	}
	t.paused = false
	return errors.Join(errs...)
}

// monotonicNow is bpf_ktime_get_ns's clock, now.
func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return uint64(ts.Nano())
}

// byName maps the objects of a bpf2go struct (its programs, its maps)
// to the names bpf2go tagged their fields with.
func byName[T any](objs any) map[string]T {
	out := map[string]T{}
	v := reflect.ValueOf(objs).Elem()
	for i := 0; i < v.NumField(); i++ {
		if obj, ok := v.Field(i).Interface().(T); ok {
			out[v.Type().Field(i).Tag.Get("ebpf")] = obj
		}
	}
	return out
}
