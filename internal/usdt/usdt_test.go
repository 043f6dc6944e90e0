package usdt

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

const pgBinary = "/usr/lib/postgresql/15/bin/postgres"

// note builds one 4-byte-aligned ELF64 SDT note.
func note(pc, base, sema uint64, provider, name, args string) []byte {
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	desc := binary.LittleEndian.AppendUint64(nil, pc)
	desc = binary.LittleEndian.AppendUint64(desc, base)
	desc = binary.LittleEndian.AppendUint64(desc, sema)
	desc = append(desc, provider+"\x00"+name+"\x00"+args+"\x00"...)
	binary.Write(&b, binary.LittleEndian, [3]uint32{8, uint32(len(desc)), ntStapsdt})
	b.WriteString("stapsdt\x00")
	pad()
	b.Write(desc)
	pad()
	return b.Bytes()
}

// synthELF builds a minimal ELF64 with two PT_LOAD segments, a
// .stapsdt.base at baseAddr and the given note section contents.
//
//	text: vaddr 0x401000, file 0x1000, size 0x1000
//	data: vaddr 0x603000, file 0x2000, filesz 0x100, memsz 0x1000
func synthELF(t *testing.T, notes []byte, baseAddr uint64) *elf.File {
	t.Helper()
	const (
		ehsize, phsize, shsize = 64, 56, 64
		notesOff               = 0x3000
	)
	shstr := []byte("\x00.note.stapsdt\x00.stapsdt.base\x00.shstrtab\x00")
	shstrOff := uint64(notesOff + len(notes))
	shOff := (shstrOff + uint64(len(shstr)) + 7) &^ 7

	img := make([]byte, shOff+4*shsize)
	copy(img, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	le := binary.LittleEndian
	le.PutUint16(img[16:], uint16(elf.ET_EXEC))
	le.PutUint16(img[18:], uint16(elf.EM_X86_64))
	le.PutUint32(img[20:], 1)
	le.PutUint64(img[32:], ehsize) // phoff
	le.PutUint64(img[40:], shOff)
	le.PutUint16(img[52:], ehsize)
	le.PutUint16(img[54:], phsize)
	le.PutUint16(img[56:], 2)
	le.PutUint16(img[58:], shsize)
	le.PutUint16(img[60:], 4)
	le.PutUint16(img[62:], 3) // shstrndx

	prog := func(i int, flags uint32, off, vaddr, filesz, memsz uint64) {
		p := img[ehsize+i*phsize:]
		le.PutUint32(p[0:], uint32(elf.PT_LOAD))
		le.PutUint32(p[4:], flags)
		le.PutUint64(p[8:], off)
		le.PutUint64(p[16:], vaddr)
		le.PutUint64(p[24:], vaddr)
		le.PutUint64(p[32:], filesz)
		le.PutUint64(p[40:], memsz)
		le.PutUint64(p[48:], 0x1000)
	}
	prog(0, uint32(elf.PF_R|elf.PF_X), 0x1000, 0x401000, 0x1000, 0x1000)
	prog(1, uint32(elf.PF_R|elf.PF_W), 0x2000, 0x603000, 0x100, 0x1000)

	sect := func(i int, name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size, align uint64) {
		s := img[shOff+uint64(i)*shsize:]
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], uint32(typ))
		le.PutUint64(s[8:], uint64(flags))
		le.PutUint64(s[16:], addr)
		le.PutUint64(s[24:], off)
		le.PutUint64(s[32:], size)
		le.PutUint64(s[48:], align)
	}
	sect(1, 1, elf.SHT_NOTE, 0, 0, notesOff, uint64(len(notes)), 4)
	sect(2, 15, elf.SHT_PROGBITS, elf.SHF_ALLOC, baseAddr, baseAddr-0x401000+0x1000, 1, 1)
	sect(3, 29, elf.SHT_STRTAB, 0, 0, shstrOff, uint64(len(shstr)), 1)
	copy(img[notesOff:], notes)
	copy(img[shstrOff:], shstr)

	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadProbesSynthetic(t *testing.T) {
	// Notes written when .stapsdt.base was at 0x401f00; it now sits at
	// 0x401f10, as if prelinked, so every address moves by +0x10.
	var notes []byte
	notes = append(notes, note(0x401100, 0x401f00, 0x603010, "pg", "a", "8@%rbx")...)
	notes = append(notes, note(0x401200, 0x401f00, 0, "pg", "b", "")...) // no semaphore, no args
	notes = append(notes, note(0x401300, 0x401f00, 0x603020, "pg", "a", "-4@NBuffers(%rip)")...)
	f := synthELF(t, notes, 0x401f10)

	probes, err := ReadProbes(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 3 {
		t.Fatalf("got %d probes, want 3", len(probes))
	}
	p := probes[0]
	if p.PC != 0x401110 || p.Location != 0x1110 || p.Semaphore != 0x2020 || len(p.Args) != 1 || p.ArgErr != nil {
		t.Errorf("probe a = %+v", p)
	}
	if p := probes[1]; p.Name != "b" || p.Semaphore != 0 || p.Args != nil || p.ArgErr != nil || p.Location != 0x1210 {
		t.Errorf("probe b = %+v", p)
	}
	if p := probes[2]; !errors.Is(p.ArgErr, ErrUnsupported) || p.Args != nil || p.ArgSpec != "-4@NBuffers(%rip)" {
		t.Errorf("probe with unsupported args = %+v", p)
	}
	if got := Find(probes, "pg", "a"); len(got) != 2 || got[1].PC != 0x401310 {
		t.Errorf("Find(pg, a) = %+v", got)
	}
	if got := Find(probes, "pg", "zzz"); len(got) != 0 {
		t.Errorf("Find(pg, zzz) = %+v", got)
	}
}

func TestReadProbesBadAddresses(t *testing.T) {
	tests := []struct {
		name       string
		pc, sema   uint64
		wantSubstr string
	}{
		{"pc outside segments", 0x900000, 0, "0x900000 is not in any PT_LOAD"},
		{"semaphore outside segments", 0x401100, 0x900000, "0x900000 is not in any PT_LOAD"},
		{"semaphore in bss", 0x401100, 0x603800, "beyond the file-backed part"},
	}
	for _, tt := range tests {
		f := synthELF(t, note(tt.pc, 0x401f00, tt.sema, "pg", "a", ""), 0x401f00)
		_, err := ReadProbes(f)
		if err == nil || !strings.Contains(err.Error(), tt.wantSubstr) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.wantSubstr)
		}
	}
}

func TestReadProbesTruncated(t *testing.T) {
	n := note(0x401100, 0x401f00, 0, "pg", "a", "")
	for _, cut := range []int{5, 20, len(n) - 8} {
		if _, err := ReadProbes(synthELF(t, n[:cut], 0x401f00)); err == nil {
			t.Errorf("note cut to %d bytes: no error", cut)
		}
	}
}

func TestNoProbes(t *testing.T) {
	// The Go test binary itself has no SDT notes.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(exe); !errors.Is(err, ErrNoProbes) {
		t.Errorf("Open(%s) err = %v, want ErrNoProbes", exe, err)
	}
	if _, err := Open("/nonexistent/postgres"); err == nil || !strings.Contains(err.Error(), "/nonexistent/postgres") {
		t.Errorf("Open of a missing file: err = %v, want it to name the path", err)
	}
}

// readelfNote is one note as printed by binutils' readelf -n.
type readelfNote struct {
	provider, name, args string
	loc, base, sema      uint64
}

// readelfNotes parses `readelf -n` for an independent view of the
// notes. It returns nil when readelf is not installed.
func readelfNotes(t *testing.T, path string) []readelfNote {
	if _, err := exec.LookPath("readelf"); err != nil {
		return nil
	}
	out, err := exec.Command("readelf", "-n", path).Output()
	if err != nil {
		t.Fatalf("readelf: %v", err)
	}
	var notes []readelfNote
	hex := func(s string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(s), "0x"), 16, 64)
		if err != nil {
			t.Fatalf("readelf value %q: %v", s, err)
		}
		return v
	}
	inSDT := false // readelf prints every note section; only .note.stapsdt matters
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "Displaying notes found in:") {
			inSDT = strings.HasSuffix(line, noteSection)
			continue
		}
		// Without a line break, "Provider:" follows the owner and type
		// columns on the note's first line; with one, it starts a line.
		if i := strings.Index(line, "Provider: "); i >= 0 {
			line = line[i:]
		}
		key, val, _ := strings.Cut(line, ": ")
		if !inSDT || (key != "Provider" && len(notes) == 0) {
			continue
		}
		switch key {
		case "Provider":
			notes = append(notes, readelfNote{provider: val})
		case "Name":
			notes[len(notes)-1].name = val
		case "Arguments":
			notes[len(notes)-1].args = val
		case "Location":
			// "0x..., Base: 0x..., Semaphore: 0x..."
			parts := strings.Split(val, ",")
			n := &notes[len(notes)-1]
			n.loc = hex(parts[0])
			_, b, _ := strings.Cut(parts[1], ": ")
			_, s, _ := strings.Cut(parts[2], ": ")
			n.base, n.sema = hex(b), hex(s)
		}
	}
	if len(notes) == 0 {
		t.Fatalf("could not parse any SDT note from readelf -n output:\n%s", out)
	}
	return notes
}

// sectionOffset maps an address to a file offset through the section
// headers, independently of the program headers ReadProbes uses.
func sectionOffset(t *testing.T, f *elf.File, addr uint64) (uint64, *elf.Section) {
	t.Helper()
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS && addr >= s.Addr && addr < s.Addr+s.Size {
			return addr - s.Addr + s.Offset, s
		}
	}
	t.Fatalf("address %#x is in no section", addr)
	return 0, nil
}

func TestPostgresBinary(t *testing.T) {
	if _, err := os.Stat(pgBinary); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the PostgreSQL 15 binary is missing: %v", err)
		}
		t.Skipf("needs Debian's PostgreSQL 15 built with --enable-dtrace: %v", err)
	}
	probes, err := Open(pgBinary)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(pgBinary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := os.ReadFile(pgBinary)
	if err != nil {
		t.Fatal(err)
	}
	probesSec := f.Section(".probes")
	if probesSec == nil {
		t.Fatal("no .probes section (where the semaphores live)")
	}

	if len(probes) < 60 {
		t.Errorf("got %d probe sites, want about 72", len(probes))
	}
	unsupported := 0
	for _, p := range probes {
		if p.Provider != "postgresql" {
			t.Errorf("%s:%s: unexpected provider", p.Provider, p.Name)
		}
		if p.ArgErr != nil {
			if !errors.Is(p.ArgErr, ErrUnsupported) {
				t.Errorf("%s: args %q: %v", p.Name, p.ArgSpec, p.ArgErr)
			}
			t.Logf("skipped site %s: %v", p.Name, p.ArgErr)
			unsupported++
		}
		// The site is the single-byte nop the STAP_PROBE macro emits.
		want, sec := sectionOffset(t, f, p.PC)
		if p.Location != want || sec.Name != ".text" {
			t.Errorf("%s: Location %#x, want %#x (section %s)", p.Name, p.Location, want, sec.Name)
		} else if raw[p.Location] != 0x90 {
			t.Errorf("%s: byte at Location %#x is %#x, want nop 0x90", p.Name, p.Location, raw[p.Location])
		}
		// Semaphores are 2-byte counters in .probes.
		if p.Semaphore < probesSec.Offset || p.Semaphore+2 > probesSec.Offset+probesSec.Size {
			t.Errorf("%s: Semaphore %#x outside .probes [%#x, %#x)", p.Name, p.Semaphore,
				probesSec.Offset, probesSec.Offset+probesSec.Size)
		}
	}
	t.Logf("%d sites, %d with unsupported argument forms", len(probes), unsupported)
	if unsupported > len(probes)/10 {
		t.Errorf("%d of %d sites have unsupported args", unsupported, len(probes))
	}

	for _, name := range []string{"query__start", "query__done", "smgr__md__read__start", "lock__wait__start", "lwlock__wait__start"} {
		sites := Find(probes, "postgresql", name)
		if len(sites) == 0 {
			t.Errorf("probe %s not found", name)
			continue
		}
		for _, s := range sites {
			// All sites of a probe share the one semaphore of its name.
			if s.Semaphore == 0 || s.Semaphore != sites[0].Semaphore {
				t.Errorf("%s: semaphore %#x, first site has %#x", name, s.Semaphore, sites[0].Semaphore)
			}
			if s.ArgErr != nil {
				t.Errorf("%s: %v", name, s.ArgErr)
			}
		}
	}
	if qs := Find(probes, "postgresql", "query__start"); len(qs) > 0 {
		if a := qs[0].Args; len(a) == 0 || a[0].Size != 8 || a[0].Kind != ArgReg {
			t.Errorf("query__start args %q = %+v, want an 8-byte register first", qs[0].ArgSpec, a)
		}
	}

	notes := readelfNotes(t, pgBinary)
	if notes == nil {
		t.Log("readelf not installed: skipping the comparison with readelf -n")
		return
	}
	if len(notes) != len(probes) {
		t.Fatalf("readelf lists %d notes, ReadProbes %d", len(notes), len(probes))
	}
	stapBase := f.Section(".stapsdt.base").Addr
	for i, n := range notes {
		p := probes[i]
		shift := stapBase - n.base
		if p.Provider != n.provider || p.Name != n.name || p.ArgSpec != n.args || p.PC != n.loc+shift {
			t.Errorf("note %d: got %s:%s pc %#x args %q, readelf %s:%s pc %#x args %q",
				i, p.Provider, p.Name, p.PC, p.ArgSpec, n.provider, n.name, n.loc+shift, n.args)
		}
		if n.sema == 0 {
			if p.Semaphore != 0 {
				t.Errorf("%s: Semaphore %#x, readelf has none", p.Name, p.Semaphore)
			}
		} else if wantSema, _ := sectionOffset(t, f, n.sema+shift); p.Semaphore != wantSema {
			t.Errorf("%s: Semaphore %#x, want %#x (readelf address %#x)", p.Name, p.Semaphore, wantSema, n.sema)
		}
	}
}

// The note reader on whatever a .note.stapsdt section may hold: an error
// or probes the loader can use, never a panic.
func FuzzReadProbes(f *testing.F) {
	good := note(0x401100, 0x401f00, 0x603010, "postgresql", "query__start", "8@%rax -4@4(%rbx)")
	f.Add(good)
	f.Add(append(good, note(0x401200, 0x401f00, 0, "pg", "b", "")...))
	f.Add(good[:20])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, notes []byte) {
		probes, err := ReadProbes(synthELF(t, notes, 0x401f00))
		if err != nil {
			return
		}
		for _, p := range probes {
			if p.Provider == "" || p.Name == "" {
				t.Fatalf("a probe without a name: %+v", p)
			}
			// Inside the file-backed parts of the two segments synthELF makes.
			if p.Location < 0x1000 || p.Location >= 0x2100 || p.Semaphore != 0 && (p.Semaphore < 0x1000 || p.Semaphore >= 0x2100) {
				t.Fatalf("offsets outside the file: %+v", p)
			}
			if p.Args != nil && p.ArgErr != nil {
				t.Fatalf("arguments both decoded and refused: %+v", p)
			}
		}
	})
}
