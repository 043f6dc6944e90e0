// Command bpflines tells where the BPF programs' time goes, by source
// line: it reads perf's samples of the whole machine and charges each one
// taken in a loaded program (or in a kernel function a program called) to
// the program's source line there, from the kernel's line information of
// its JIT image. Run it while the programs sampled are still loaded:
//
//	perf record -F 4999 -a -g -o perf.data -- sleep 6
//	perf script -i perf.data -F ip,sym | go run ./bench/bpflines
//
// A helper's samples (a read of user memory, a map lookup) go to the line
// that called it, so each line's share is what it costs with what it
// calls. Shares are of all samples, idle included.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// line is where a source line's code starts in a program's JIT image.
type line struct {
	addr uint64
	src  string // program: file:line text
}

func main() {
	top := flag.Int("top", 50, "lines to show")
	flag.Parse()
	lines := loadedLines()
	if len(lines) == 0 {
		fmt.Fprintln(os.Stderr, "bpflines: no loaded BPF program has line information (run as root, while the tracer runs)")
		os.Exit(1)
	}
	samples, in, counts, err := charge(os.Stdin, lines)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bpflines:", err)
		os.Exit(1)
	}
	fmt.Printf("%d samples, %d in BPF programs (%.2f%%)\n", samples, in, 100*float64(in)/float64(max(samples, 1)))
	srcs := make([]string, 0, len(counts))
	for s := range counts {
		srcs = append(srcs, s)
	}
	slices.SortFunc(srcs, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	for i, s := range srcs {
		if i == *top {
			break
		}
		fmt.Printf("%6.3f%% %s\n", 100*float64(counts[s])/float64(samples), s)
	}
}

// loadedLines is every loaded program's line starts, by address.
func loadedLines() []line {
	var lines []line
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			break
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		info, err := p.Info()
		p.Close()
		if err != nil {
			continue // its information unreadable: its samples count as no line's
		}
		addrs, ok := info.JitedLineInfos()
		infos, err := info.LineInfos()
		if !ok || err != nil || len(addrs) != len(infos) {
			continue // no BTF line information
		}
		for i, l := range infos {
			file := l.Line.FileName()
			file = file[strings.LastIndex(file, "/")+1:]
			lines = append(lines, line{addrs[i], fmt.Sprintf("%s: %s:%d %s", info.Name, file, l.Line.LineNumber(), strings.TrimSpace(l.Line.Line()))})
		}
	}
	slices.SortFunc(lines, func(a, b line) int { return cmp.Compare(a.addr, b.addr) })
	return lines
}

// charge reads perf script's samples (frames "ip symbol", innermost
// first, a blank line after each sample) and charges each one to the
// line of its innermost frame in a BPF program.
func charge(r io.Reader, lines []line) (samples, in int, counts map[string]int, err error) {
	counts = map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	depth, charged := 0, false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			if depth > 0 {
				samples++
			}
			depth, charged = 0, false
			continue
		}
		depth++
		if charged || len(f) < 2 || !strings.HasPrefix(f[1], "bpf_prog_") {
			continue
		}
		ip, perr := strconv.ParseUint(f[0], 16, 64)
		if perr != nil {
			continue
		}
		if depth > 1 { // a return address: the call is the instruction before
			ip--
		}
		charged = true
		in++
		i, found := slices.BinarySearchFunc(lines, ip, func(l line, ip uint64) int { return cmp.Compare(l.addr, ip) })
		if !found {
			i--
		}
		if i < 0 {
			counts["(before any line)"]++
			continue
		}
		counts[lines[i].src]++
	}
	if depth > 0 {
		samples++
	}
	return samples, in, counts, sc.Err()
}
