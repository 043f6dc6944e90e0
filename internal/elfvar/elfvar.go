// Package elfvar finds where things of a running process live: a global
// variable of its executable in its memory (its ELF symbol's value, moved
// by the address the kernel loaded the executable at: position-independent
// executables load anywhere), and the files of the libraries it maps.
// Processes forked without exec share both, so a database's postmaster
// gives them for all its backends.
package elfvar

import (
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dbiolat/dbiolat/internal/procfs"
)

// ErrNoSymbol says the executable does not define the variable or
// function (stripped, or another version of the program).
var ErrNoSymbol = errors.New("no such symbol")

// Address returns the address of the variable name in process pid, whose
// executable is binary (a path that opens the same file, such as
// /proc/PID/exe).
func Address(pid int, binary, name string) (uint64, error) {
	return address(pid, binary, name, elf.STT_OBJECT)
}

// FunctionAddress is Address of a function: where its code runs, to read.
func FunctionAddress(pid int, binary, name string) (uint64, error) {
	return address(pid, binary, name, elf.STT_FUNC)
}

func address(pid int, binary, name string, kind elf.SymType) (uint64, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", binary, err)
	}
	defer f.Close()
	sym, err := symbol(f, name, kind)
	if err != nil {
		return 0, fmt.Errorf("%s in %s: %w", name, binary, err)
	}
	value := sym.Value
	if f.Type != elf.ET_DYN { // a fixed-address executable: the value is the address
		return value, nil
	}
	bias, err := loadBias(pid, binary, f)
	if err != nil {
		return 0, err
	}
	return bias + value, nil
}

// FunctionCode returns a function's machine code (as long as its symbol
// says), read from the file binary.
func FunctionCode(binary, name string) ([]byte, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", binary, err)
	}
	defer f.Close()
	sym, err := symbol(f, name, elf.STT_FUNC)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", name, binary, err)
	}
	value := sym.Value
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && value >= p.Vaddr && value < p.Vaddr+p.Filesz {
			code := make([]byte, min(sym.Size, p.Vaddr+p.Filesz-value))
			if _, err := p.ReadAt(code, int64(value-p.Vaddr)); err != nil {
				return nil, fmt.Errorf("reading %s in %s: %w", name, binary, err)
			}
			return code, nil
		}
	}
	return nil, fmt.Errorf("%s in %s: not in an executable segment", name, binary)
}

// symbol returns a symbol of a kind (data, function), from the dynamic
// symbols (kept even when the static table is stripped) or the static ones.
func symbol(f *elf.File, name string, kind elf.SymType) (elf.Symbol, error) {
	for _, read := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
		syms, err := read()
		if err != nil {
			continue
		}
		for _, s := range syms {
			if s.Name == name && elf.ST_TYPE(s.Info) == kind && s.Section != elf.SHN_UNDEF {
				return s, nil
			}
		}
	}
	return elf.Symbol{}, ErrNoSymbol
}

// LoadBias is where the kernel loaded the executable binary (a path that
// opens it, such as /proc/PID/exe) in process pid: what to add to a
// symbol's value for its address.
func LoadBias(pid int, binary string) (uint64, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return loadBias(pid, binary, f)
}

// loadBias is where the kernel loaded a position-independent executable
// in process pid: the start of the mapping of its first loadable segment
// (found by the file's device and inode, whatever path maps shows), less
// that segment's page-aligned address in the file's layout.
func loadBias(pid int, binary string, f *elf.File) (uint64, error) {
	var first *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			first = p
			break
		}
	}
	if first == nil {
		return 0, fmt.Errorf("%s has no loadable segment", binary)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(binary, &st); err != nil {
		return 0, err
	}
	maps, err := procfs.Maps(pid)
	if err != nil {
		return 0, fmt.Errorf("reading the memory map of process %d: %w", pid, err)
	}
	const page = 4096
	for _, m := range maps {
		if m.Inode == st.Ino && m.Dev == st.Dev && m.Offset == first.Off&^(page-1) {
			return m.Lo - first.Vaddr&^(page-1), nil
		}
	}
	return 0, fmt.Errorf("process %d has no mapping of %s", pid, binary)
}

// Library returns the file of a shared library process pid has mapped
// whose name starts with prefix ("libssl.so"), as a path that opens it
// from here whether the process runs in our root, a chroot, another mount
// namespace (a container) or a chroot inside one (procfs.MappedFile); ""
// if none is mapped.
func Library(pid int, prefix string) (string, error) {
	maps, err := procfs.Maps(pid)
	if err != nil {
		return "", fmt.Errorf("reading the memory map of process %d: %w", pid, err)
	}
	for _, m := range maps {
		if m.Path != "" && strings.HasPrefix(filepath.Base(m.Path), prefix) {
			return procfs.MappedFile(pid, m)
		}
	}
	return "", nil
}
