package usdt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnsupported marks argument specs that are well formed but use an
// operand form we do not decode (SIB addressing, segment prefixes, symbolic
// displacements, high-byte registers, non-general-purpose registers). The
// loader tests for it with errors.Is and skips the site with a warning rather
// than failing the whole attach.
var ErrUnsupported = errors.New("unsupported USDT argument form")

// ArgKind says where a USDT argument's value lives.
type ArgKind uint8

const (
	ArgConst    ArgKind = iota // "-4@$8192": the value is the constant
	ArgReg                     // "8@%rbx": the value is in a register
	ArgRegDeref                // "4@8(%r13)", "-4@-136(%rbp)", "4@(%r12)": memory at register + offset
)

func (k ArgKind) String() string {
	switch k {
	case ArgConst:
		return "const"
	case ArgReg:
		return "reg"
	case ArgRegDeref:
		return "reg-deref"
	}
	return fmt.Sprintf("ArgKind(%d)", uint8(k))
}

// Arg is one decoded argument of a probe site. It carries exactly what a BPF
// program needs to fetch the value from struct pt_regs at the probe hit.
type Arg struct {
	Kind      ArgKind
	Size      int    // 1, 2, 4 or 8 bytes
	Signed    bool   // a negative size in the spec
	Reg       string // canonical 64-bit register name ("rbx"), "" for constants
	RegOffset int    // offset of that 64-bit register in the kernel's x86_64 struct pt_regs
	Value     int64  // the constant (ArgConst) or the memory offset (ArgRegDeref)
}

// reg describes one assembler register name: the 64-bit register it is part
// of. The BPF side always reads the full 64-bit slot from pt_regs and narrows
// it to Arg.Size, so the sub-register width itself is not needed.
type reg struct {
	name64 string
	offset int
}

// ptRegs holds the byte offsets of the x86_64 struct pt_regs fields
// (arch/x86/include/asm/ptrace.h); they are kernel ABI and do not change.
var ptRegs = map[string]int{
	"r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40,
	"r11": 48, "r10": 56, "r9": 64, "r8": 72, "rax": 80, "rcx": 88,
	"rdx": 96, "rsi": 104, "rdi": 112, "orig_ax": 120, "rip": 128,
	"cs": 136, "flags": 144, "rsp": 152, "ss": 160,
}

// regs maps every general-purpose register name the compiler may emit in
// an SDT note (64/32/16/8-bit forms) to its 64-bit register.
var regs = func() map[string]reg {
	m := map[string]reg{}
	add := func(r64 string, aliases ...string) {
		r := reg{name64: r64, offset: ptRegs[r64]}
		m[r64] = r
		for _, a := range aliases {
			m[a] = r
		}
	}
	add("rax", "eax", "ax", "al")
	add("rbx", "ebx", "bx", "bl")
	add("rcx", "ecx", "cx", "cl")
	add("rdx", "edx", "dx", "dl")
	add("rsi", "esi", "si", "sil")
	add("rdi", "edi", "di", "dil")
	add("rbp", "ebp", "bp", "bpl")
	add("rsp", "esp", "sp", "spl")
	for i := 8; i <= 15; i++ {
		r := fmt.Sprintf("r%d", i)
		add(r, r+"d", r+"w", r+"b")
	}
	// rip only makes sense as the base of a memory operand with a numeric
	// displacement; it is accepted so such operands decode like any other.
	add("rip")
	return m
}()

// highByte registers are bits 8..15 of a 64-bit register; reading them would
// need a shift the BPF side does not implement, so they are refused clearly.
var highByte = map[string]bool{"ah": true, "bh": true, "ch": true, "dh": true}

// ParseArg decodes one argument spec of an SDT note, such as "-4@%r14d".
// The grammar is GNU as AT&T operand syntax prefixed by "size@", where a
// negative size means a signed value. A spec without "size@" is the old
// format and is taken as 8 bytes unsigned.
func ParseArg(spec string) (Arg, error) {
	a, err := parseArg(spec)
	if err != nil {
		return Arg{}, fmt.Errorf("usdt arg %q: %w", spec, err)
	}
	return a, nil
}

func parseArg(spec string) (Arg, error) {
	a := Arg{Size: 8}
	op := spec
	if i := strings.IndexByte(spec, '@'); i >= 0 {
		n, err := strconv.Atoi(spec[:i])
		if err != nil {
			return Arg{}, fmt.Errorf("bad size %q", spec[:i])
		}
		if n < 0 {
			a.Signed = true
			n = -n
		}
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return Arg{}, fmt.Errorf("size %d is not 1, 2, 4 or 8", n)
		}
		a.Size = n
		op = spec[i+1:]
	}
	if op == "" {
		return Arg{}, errors.New("empty operand")
	}
	if strings.ContainsAny(op, " \t") {
		return Arg{}, errors.New("whitespace in operand")
	}

	switch {
	case op == "$":
		return Arg{}, errors.New("empty constant")
	case op[0] == '$':
		v, err := strconv.ParseInt(op[1:], 0, 64)
		if err != nil {
			// "$sym" is a link-time constant we cannot evaluate here.
			return Arg{}, fmt.Errorf("%w: non-numeric constant %q", ErrUnsupported, op)
		}
		a.Kind = ArgConst
		a.Value = v
		return a, nil

	case op[0] == '%':
		if strings.ContainsRune(op, ':') {
			return Arg{}, fmt.Errorf("%w: segment prefix in %q", ErrUnsupported, op)
		}
		r, err := lookupReg(op)
		if err != nil {
			return Arg{}, err
		}
		a.Kind = ArgReg
		a.Reg, a.RegOffset = r.name64, r.offset
		return a, nil
	}

	// Memory operand: [disp](%reg). Anything else GNU as allows here
	// (segment overrides, index/scale, symbols) is reported as unsupported.
	open := strings.IndexByte(op, '(')
	if open < 0 {
		if strings.ContainsRune(op, ':') {
			return Arg{}, fmt.Errorf("%w: segment prefix in %q", ErrUnsupported, op)
		}
		return Arg{}, fmt.Errorf("%w: operand %q", ErrUnsupported, op)
	}
	if !strings.HasSuffix(op, ")") || strings.Count(op, "(") != 1 || strings.Count(op, ")") != 1 {
		return Arg{}, fmt.Errorf("malformed memory operand %q", op)
	}
	disp, inner := op[:open], op[open+1:len(op)-1]
	if strings.ContainsRune(disp, ':') {
		return Arg{}, fmt.Errorf("%w: segment prefix in %q", ErrUnsupported, op)
	}
	if strings.ContainsRune(inner, ',') {
		return Arg{}, fmt.Errorf("%w: index/scale addressing in %q", ErrUnsupported, op)
	}
	if disp != "" {
		v, err := strconv.ParseInt(disp, 0, 64)
		if err != nil {
			// e.g. "40+CheckpointStats(%rip)": needs symbol resolution.
			return Arg{}, fmt.Errorf("%w: symbolic displacement %q", ErrUnsupported, disp)
		}
		a.Value = v
	}
	if !strings.HasPrefix(inner, "%") {
		return Arg{}, fmt.Errorf("malformed memory operand %q", op)
	}
	r, err := lookupReg(inner)
	if err != nil {
		return Arg{}, err
	}
	a.Kind = ArgRegDeref
	a.Reg, a.RegOffset = r.name64, r.offset
	return a, nil
}

// lookupReg resolves "%name" to its 64-bit register.
func lookupReg(s string) (reg, error) {
	name := strings.TrimPrefix(s, "%")
	if r, ok := regs[name]; ok {
		return r, nil
	}
	if highByte[name] {
		return reg{}, fmt.Errorf("%w: high-byte register %s", ErrUnsupported, s)
	}
	if name == "" {
		return reg{}, errors.New("missing register name")
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return reg{}, fmt.Errorf("malformed register %q", s)
		}
	}
	// Compilers may place floating-point arguments in %xmmN and the like.
	return reg{}, fmt.Errorf("%w: register %s", ErrUnsupported, s)
}

// ParseArgs decodes the whole space-separated argument string of a note.
// An empty string means a probe without arguments.
func ParseArgs(s string) ([]Arg, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, nil
	}
	args := make([]Arg, 0, len(fields))
	for _, f := range fields {
		a, err := ParseArg(f)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	return args, nil
}
