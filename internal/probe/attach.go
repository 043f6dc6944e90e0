package probe

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
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

// attachHooks attaches every loaded program that has a kernel hook.
func (t *Tracer) attachHooks(spec *ebpf.CollectionSpec) error {
	progs := byName[*ebpf.Program](&t.objs.dbiolatPrograms)
	for _, h := range hooks(spec, t.families) {
		prog := progs[h.Program]
		var l link.Link
		var err error
		if h.Group == "" {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		} else {
			l, err = link.Tracepoint(h.Group, h.Name, prog, nil)
		}
		if err != nil {
			return fmt.Errorf("attaching %s to %s: %w", h.Program, h, err)
		}
		t.add(l, prog)
	}
	return nil
}

func (t *Tracer) add(l link.Link, prog *ebpf.Program) {
	t.links = append(t.links, l)
	t.progs[prog] = true
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
