package main

import (
	"maps"
	"strings"
	"testing"
)

// A sample is charged once, to its innermost program frame's line: a
// return address to the line of the call before it, a program's own
// instruction to the line it lies in; samples outside programs count in
// the total only.
func TestChargeInnermostProgramLine(t *testing.T) {
	lines := []line{{0x1000, "p: a.h:1"}, {0x1010, "p: a.h:2"}, {0x1020, "p: a.h:3"}}
	perf := `
	ffffffff81000000 copy_from_user_nofault
	    1010 bpf_prog_abc_p
	    1018 bpf_prog_abc_p
	ffffffff81000100 bpf_trace_run3

	    1015 bpf_prog_abc_p
	ffffffff81000100 bpf_trace_run3

	    1020 bpf_prog_abc_p

	ffffffff81000200 schedule
	    7f00 [unknown]

	     fff bpf_prog_abc_p
`
	samples, in, counts, err := charge(strings.NewReader(perf), lines)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"p: a.h:1": 1, "p: a.h:2": 1, "p: a.h:3": 1, "(before any line)": 1}
	if samples != 5 || in != 4 || !maps.Equal(counts, want) {
		t.Errorf("samples %d, in programs %d, counts %v; want 5, 4, %v", samples, in, counts, want)
	}
}
