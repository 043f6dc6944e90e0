// Package usdt reads SystemTap SDT (USDT) probe notes from an ELF file and
// turns them into what a uprobe attach needs: file offsets of the probe
// sites and of their semaphores, and decoded argument locations.
//
// The note format is described on the SystemTap wiki page
// "UserSpaceProbeImplementation". Only x86_64 argument syntax is decoded.
package usdt

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// ErrNoProbes is returned for an ELF without SDT notes, so callers can tell
// "this build has no --enable-dtrace" apart from a broken file.
var ErrNoProbes = errors.New("no SDT probes (.note.stapsdt) in ELF")

const (
	noteSection = ".note.stapsdt"
	baseSection = ".stapsdt.base"
	noteOwner   = "stapsdt"
	ntStapsdt   = 3 // NT_STAPSDT: the current note format with semaphore
)

// Probe is one probe site. A probe name can have several sites (the macro
// is expanded at every call, and inlining duplicates it); each site is a
// separate Probe and needs its own uprobe.
type Probe struct {
	Provider, Name string
	PC             uint64 // virtual address of the site, after the .stapsdt.base adjustment
	Location       uint64 // file offset of the site: pass as UprobeOptions.Address
	Semaphore      uint64 // file offset of the semaphore, 0 when the probe has none: pass as RefCtrOffset
	Args           []Arg
	ArgSpec        string // the raw argument string from the note
	// ArgErr is why Args is nil although ArgSpec is not empty. A site whose
	// arguments cannot be decoded is still listed, so the loader can decide
	// to skip it (errors.Is(ArgErr, ErrUnsupported)) without losing the others.
	ArgErr error
}

// Open reads the probes of the ELF file at path.
func Open(path string) ([]Probe, error) {
	f, err := elf.Open(path)
	if err != nil {
		// elf.FormatError does not name the file, so always add the path.
		return nil, fmt.Errorf("usdt: %s: %w", path, err)
	}
	defer f.Close()
	probes, err := ReadProbes(f)
	if err != nil {
		return nil, fmt.Errorf("usdt: %s: %w", path, err)
	}
	return probes, nil
}

// ReadProbes returns all SDT notes in .note.stapsdt, in file order.
func ReadProbes(f *elf.File) ([]Probe, error) {
	sec := f.Section(noteSection)
	if sec == nil {
		return nil, ErrNoProbes
	}
	if sec.Type == elf.SHT_NOBITS {
		// Separate debug-info files keep the header but not the contents.
		return nil, fmt.Errorf("%s has no contents in this file", noteSection)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", noteSection, err)
	}

	// Prelink may move the binary after the notes were written; the note
	// records where .stapsdt.base was at link time, so the difference to
	// its current address is the shift to apply to the note's addresses.
	var base uint64
	haveBase := false
	if s := f.Section(baseSection); s != nil {
		base, haveBase = s.Addr, true
	}

	addrSize := 4
	if f.Class == elf.ELFCLASS64 {
		addrSize = 8
	}
	// Notes are padded to 4 bytes in practice, even on ELF64; a section
	// explicitly aligned to 8 uses 8-byte padding (as readelf assumes too).
	align := uint64(4)
	if sec.Addralign == 8 {
		align = 8
	}

	var probes []Probe
	bo := f.ByteOrder
	for off := uint64(0); off < uint64(len(data)); {
		if uint64(len(data))-off < 12 {
			return nil, fmt.Errorf("%s: truncated note header at offset %#x", noteSection, off)
		}
		namesz := uint64(bo.Uint32(data[off:]))
		descsz := uint64(bo.Uint32(data[off+4:]))
		typ := bo.Uint32(data[off+8:])
		nameOff := off + 12
		descOff := nameOff + roundUp(namesz, align)
		end := descOff + roundUp(descsz, align)
		if namesz > uint64(len(data)) || descsz > uint64(len(data)) || descOff+descsz > uint64(len(data)) {
			return nil, fmt.Errorf("%s: note at offset %#x overruns the section", noteSection, off)
		}
		name := strings.TrimRight(string(data[nameOff:nameOff+namesz]), "\x00")
		desc := data[descOff : descOff+descsz]
		noteOff := off
		off = min(end, uint64(len(data)))

		if name != noteOwner || typ != ntStapsdt {
			continue // other owners, and older SDT note versions we do not read
		}
		p, noteBase, err := parseNote(desc, bo, addrSize)
		if err != nil {
			return nil, fmt.Errorf("%s: note at offset %#x: %w", noteSection, noteOff, err)
		}
		// The semaphore is shifted like the pc, as GDB does: prelink moves
		// all segments together. For unprelinked binaries the shift is 0.
		if haveBase && noteBase != 0 {
			p.PC += base - noteBase
			if p.Semaphore != 0 {
				p.Semaphore += base - noteBase
			}
		}
		if p.Location, err = fileOffset(f.Progs, p.PC); err != nil {
			return nil, fmt.Errorf("probe %s:%s site: %w", p.Provider, p.Name, err)
		}
		if p.Semaphore != 0 {
			if p.Semaphore, err = fileOffset(f.Progs, p.Semaphore); err != nil {
				return nil, fmt.Errorf("probe %s:%s semaphore: %w", p.Provider, p.Name, err)
			}
		}
		probes = append(probes, p)
	}
	if len(probes) == 0 {
		return nil, ErrNoProbes
	}
	return probes, nil
}

// parseNote decodes one NT_STAPSDT descriptor:
// pc, base, semaphore (address-sized), then provider\0 name\0 args\0.
// PC and Semaphore come back as the raw link-time addresses, with the
// recorded base beside them, for the caller to adjust and convert.
func parseNote(desc []byte, bo binary.ByteOrder, addrSize int) (p Probe, base uint64, err error) {
	if len(desc) < 3*addrSize {
		return Probe{}, 0, fmt.Errorf("descriptor too short (%d bytes)", len(desc))
	}
	word := func(i int) uint64 {
		if addrSize == 8 {
			return bo.Uint64(desc[i*8:])
		}
		return uint64(bo.Uint32(desc[i*4:]))
	}
	p.PC, base, p.Semaphore = word(0), word(1), word(2)

	strs := strings.SplitN(string(desc[3*addrSize:]), "\x00", 4)
	if len(strs) < 4 {
		return Probe{}, 0, errors.New("descriptor strings are not provider\\0name\\0args\\0")
	}
	p.Provider, p.Name, p.ArgSpec = strs[0], strs[1], strs[2]
	if p.Provider == "" || p.Name == "" {
		return Probe{}, 0, errors.New("empty provider or probe name")
	}
	p.Args, p.ArgErr = ParseArgs(p.ArgSpec)
	return p, base, nil
}

// fileOffset converts a virtual address to a file offset through the
// PT_LOAD segment that maps it: uprobes and their reference counters are
// identified by (inode, offset), not by address, since the load address of a
// PIE is only known per process.
func fileOffset(progs []*elf.Prog, addr uint64) (uint64, error) {
	var bssErr error
	for _, p := range progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr-p.Vaddr >= p.Memsz {
			continue
		}
		if addr-p.Vaddr >= p.Filesz {
			// Zero-filled (.bss-like) memory has no bytes in the file, so
			// the kernel has no offset to attach to.
			bssErr = fmt.Errorf("address %#x is beyond the file-backed part of its segment", addr)
			continue
		}
		return addr - p.Vaddr + p.Off, nil
	}
	if bssErr != nil {
		return 0, bssErr
	}
	return 0, fmt.Errorf("address %#x is not in any PT_LOAD segment", addr)
}

// Find returns all sites of one probe, in file order.
func Find(probes []Probe, provider, name string) []Probe {
	var out []Probe
	for _, p := range probes {
		if p.Provider == provider && p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

func roundUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }
