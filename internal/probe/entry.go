package probe

// Where a uprobe on a function's entry costs least. The kernel replaces
// the probed instruction with a breakpoint; after our program runs, it
// either emulates that instruction (x86: a push, a jump, a call, a
// conditional jump, a nop) or copies it out of line and single-steps it,
// a second trap. On this kind of VM the single step costs about 12 µs,
// five times the breakpoint (measured: an empty uprobe on MariaDB's
// thd_wait_begin, whose first instruction is a test, took 4.1% of the
// machine's CPU under sysbench; the same probe on the conditional jump
// after it 0.7%). So an entry probe moves past a few leading instructions
// that compare or load into scratch registers (they change no register
// the program reads, no memory) to the first instruction the kernel
// emulates, if it comes within the function's first bytes. The program
// sees the same arguments there.

import "github.com/dbiolat/dbiolat/internal/elfvar"

// entryScan is how many of a function's first bytes are looked at.
const entryScan = 32

// entryOffset is where past a function's start (code: its first bytes)
// a uprobe sees the entry's arguments and needs no single step: 0 when
// the first instruction is emulated already, or when no emulated
// instruction follows only skippable ones.
func entryOffset(code []byte) uint64 {
	off := 0
	for off < len(code) {
		if emulated(code[off:]) {
			return uint64(off)
		}
		n := skippable(code[off:])
		if n == 0 {
			return 0
		}
		off += n
	}
	return 0
}

// emulated says the kernel's x86 uprobes emulate the instruction at the
// start of b (arch/x86/kernel/uprobes.c: push_setup_xol_ops,
// branch_setup_xol_ops): no single step.
func emulated(b []byte) bool {
	switch {
	case len(b) == 0:
		return false
	case b[0] >= 0x50 && b[0] <= 0x57: // push %reg
		return true
	case b[0] == 0x41 && len(b) > 1 && b[1] >= 0x50 && b[1] <= 0x57: // push %r8-%r15
		return true
	case b[0] >= 0x70 && b[0] <= 0x7f, b[0] == 0xeb, b[0] == 0xe9, b[0] == 0xe8, b[0] == 0x90: // jcc, jmp, call, nop
		return true
	case b[0] == 0x0f && len(b) > 1 && b[1] >= 0x80 && b[1] <= 0x8f: // jcc rel32
		return true
	}
	return false
}

// skippable is the length of the instruction at the start of b when it
// neither branches nor writes memory, the stack pointer or a register
// other than the flags and the scratch registers no argument is passed in
// (rax, r10, r11); else 0. It may read memory: it runs all the same.
func skippable(b []byte) int {
	if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa { // endbr64
		return 4
	}
	rex, i := byte(0), 0
	if len(b) > 0 && b[0]&0xf0 == 0x40 {
		rex, i = b[0], 1
	}
	if len(b) < i+2 {
		return 0
	}
	op, modrm := b[i], b[i+1]
	reg, mod := int(modrm>>3&7), modrm>>6
	switch op {
	case 0x84, 0x85, 0x38, 0x39, 0x3a, 0x3b: // test, cmp between registers
		if mod == 3 {
			return i + 2
		}
	case 0x80, 0x83: // cmp of a register or memory with an 8-bit immediate: /7
		if reg != 7 {
			return 0
		}
		if n := operandLen(b[i+1:]); n > 0 && len(b) >= i+1+n+1 {
			return i + 1 + n + 1
		}
	case 0x89: // mov into a scratch register from a register
		if dst := int(modrm&7) + int(rex&1)*8; mod == 3 && scratch(dst) { // into r/m (REX.B)
			return i + 2
		}
	case 0x8b, 0x8d: // mov (a load) or lea into a scratch register
		if n := operandLen(b[i+1:]); n > 0 && len(b) >= i+1+n && scratch(reg+int(rex>>2&1)*8) { // into reg (REX.R)
			return i + 1 + n
		}
	}
	return 0
}

// scratch says no argument is passed in register r (rax, r10, r11).
func scratch(r int) bool { return r == 0 || r == 10 || r == 11 }

// operandLen is the length of a ModRM byte and what follows it (SIB,
// displacement) at the start of b; 0 for a form not handled.
func operandLen(b []byte) int {
	modrm := b[0]
	mod, rm := modrm>>6, modrm&7
	switch {
	case mod == 3:
		return 1
	case mod == 0 && rm == 5: // %rip + disp32
		return 5
	case rm == 4: // a SIB byte: not needed by the prologues seen
		return 0
	case mod == 0:
		return 1
	case mod == 1:
		return 2
	}
	return 5 // mod 2: disp32
}

// entryProbeOffset is entryOffset of a function of a file: 0 when its
// code cannot be read (the probe then goes on its first instruction).
func entryProbeOffset(file, symbol string) uint64 {
	code, err := elfvar.FunctionCode(file, symbol, entryScan)
	if err != nil {
		return 0
	}
	return entryOffset(code)
}
