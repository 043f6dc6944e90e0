package main

// The floors: programs that return at once on a tracer's kernel hooks,
// what the machine pays before any work (configs hooks-floor, serve-fs-floor).

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/dbiolat/dbiolat/internal/probe"
)

// attachEmpty attaches a program that returns 0 to each kernel hook of
// the families: BTF tracepoints, and tracepoints (syscalls, readahead).
func attachEmpty(f probe.Families) (io.Closer, error) {
	hooks, err := probe.Hooks(f)
	if err != nil {
		return nil, err
	}
	var links links
	for _, h := range hooks {
		l, err := attachEmptyTo(h)
		if err != nil {
			links.Close()
			return nil, fmt.Errorf("attaching an empty program to %s: %w", h, err)
		}
		links = append(links, l)
	}
	return links, nil
}

func attachEmptyTo(h probe.Hook) (link.Link, error) {
	spec := &ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: h.Name, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
	if h.Group != "" {
		spec.Type, spec.AttachType, spec.AttachTo = ebpf.TracePoint, ebpf.AttachNone, ""
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the link holds it
	if h.Group != "" {
		return link.Tracepoint(h.Group, h.Name, prog, nil)
	}
	return link.AttachTracing(link.TracingOptions{Program: prog})
}

type links []link.Link

func (ls links) Close() error {
	for _, l := range ls {
		l.Close()
	}
	return nil
}
