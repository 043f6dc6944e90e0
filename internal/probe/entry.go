package probe

// Where a uprobe on a function costs least. The kernel replaces the
// probed instruction with a breakpoint; after our program runs, it either
// emulates that instruction (x86: a push, a jump, a call, a conditional
// jump, a nop) or copies it out of line and single-steps it, a second
// trap. On this kind of VM the single step costs about 12 µs, five times
// the breakpoint (measured: an empty uprobe on MariaDB's thd_wait_begin,
// whose first instruction is a test, took 4.1% of the machine's CPU under
// sysbench; the same probe on the conditional jump after it 0.7%). So:
//
//   - an entry probe moves past a few leading instructions that change no
//     register an argument is passed in (compares, loads into scratch
//     registers, the allocation of the function's stack frame and stores
//     into it: OpenSSL's SSL_write begins with its stack protector's) to
//     the first instruction the kernel emulates, if it comes within the
//     function's first bytes and no branch of the function lands among
//     them. The program sees the same register arguments there (our entry
//     programs read none from the stack).
//   - a return probe, which needs a breakpoint on the function's first
//     instruction (the return address is at the top of the stack only
//     there), single-stepped when it is not emulated, and a second trap at
//     the return, becomes a probe on the stack protector's check before
//     the function's only ret where there is one: a conditional jump,
//     where the return value is in place (returnSite). The entry's probe
//     may then move too.

import (
	"bytes"

	"golang.org/x/arch/x86/x86asm"

	"github.com/dbiolat/dbiolat/internal/elfvar"
)

// entryScan is how many of a function's first bytes are looked at.
const entryScan = 32

// endbr64 is the first instruction of functions built for Intel's CET,
// which the decoder does not know: a nop to us.
var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// decode decodes the instruction at the start of b.
func decode(b []byte) (x86asm.Inst, bool) {
	if bytes.HasPrefix(b, endbr64) {
		return x86asm.Inst{Op: x86asm.NOP, Len: len(endbr64)}, true
	}
	in, err := x86asm.Decode(b, 64)
	return in, err == nil
}

// entryOffset is where past a function's start (code: all of it) a
// uprobe sees the entry's arguments and needs no single step, within its
// first entryScan bytes: 0 when the first instruction is emulated
// already, when no emulated instruction follows only skippable ones, or
// when a direct branch of the function lands past its start and up to
// there (a loop's head: the probe would fire again on each turn).
func entryOffset(code []byte) uint64 {
	fn, ok := sweep(code)
	if !ok {
		return 0
	}
	frame := int64(0)
	for _, in := range fn.insts {
		if in.off >= entryScan || in.off > 0 && fn.targets[in.off] {
			return 0
		}
		if emulated(in.Inst) {
			return uint64(in.off)
		}
		grow, ok := skippable(in.Inst, frame)
		if !ok {
			return 0
		}
		frame += grow
	}
	return 0
}

// function is a function's code decoded in one sweep.
type function struct {
	insts   []inst
	targets map[int]bool // where its direct branches and calls land, in it or not
}

// inst is an instruction and its offset in its function.
type inst struct {
	x86asm.Inst
	off int
}

// sweep decodes a function's instructions one after the other (its
// compiler put no data among them); false if one is not known.
func sweep(code []byte) (function, bool) {
	fn := function{targets: map[int]bool{}}
	for off := 0; off < len(code); {
		in, ok := decode(code[off:])
		if !ok {
			return fn, false
		}
		if target, rel := in.Args[0].(x86asm.Rel); rel {
			fn.targets[off+in.Len+int(target)] = true
		}
		fn.insts = append(fn.insts, inst{in, off})
		off += in.Len
	}
	return fn, true
}

// conditional are the conditional jumps the kernel emulates (not jrcxz).
var conditional = map[x86asm.Op]bool{x86asm.JA: true, x86asm.JAE: true, x86asm.JB: true, x86asm.JBE: true,
	x86asm.JE: true, x86asm.JG: true, x86asm.JGE: true, x86asm.JL: true, x86asm.JLE: true, x86asm.JNE: true,
	x86asm.JNO: true, x86asm.JNP: true, x86asm.JNS: true, x86asm.JO: true, x86asm.JP: true, x86asm.JS: true}

// emulated says the kernel's x86 uprobes emulate the instruction
// (arch/x86/kernel/uprobes.c: push_setup_xol_ops, branch_setup_xol_ops):
// no single step.
func emulated(in x86asm.Inst) bool {
	r, reg := in.Args[0].(x86asm.Reg)
	_, rel := in.Args[0].(x86asm.Rel)
	switch {
	case in.Op == x86asm.PUSH:
		return reg && r >= x86asm.RAX && r <= x86asm.R15
	case in.Op == x86asm.JMP, in.Op == x86asm.CALL, conditional[in.Op]:
		return rel
	case in.Op == x86asm.NOP:
		return in.Len == 1 // 0x90; not the multi-byte forms, nor endbr64
	}
	return false
}

// skippable says the instruction neither branches nor writes a register
// an argument is passed in: it writes at most the flags, the scratch
// registers (rax, r10, r11), the stack pointer to allocate the frame
// (grow: its bytes) or a scratch register into the frame allocated so far
// (frame bytes above the stack pointer). It may read memory: it runs all
// the same.
func skippable(in x86asm.Inst, frame int64) (grow int64, ok bool) {
	dst, src := in.Args[0], in.Args[1]
	switch in.Op {
	case x86asm.NOP, x86asm.TEST, x86asm.CMP:
		return 0, true
	case x86asm.XOR: // of a scratch register with itself: zeroing it
		return 0, dst == src && scratch(dst)
	case x86asm.MOV, x86asm.LEA:
		if scratch(dst) {
			return 0, true
		}
		m, ok := dst.(x86asm.Mem) // a store: of a scratch register into the frame
		return 0, ok && scratch(src) && m.Segment == 0 && m.Base == x86asm.RSP && m.Index == 0 &&
			m.Disp >= 0 && m.Disp+int64(in.MemBytes) <= frame
	case x86asm.SUB: // the frame's allocation
		if n, ok := src.(x86asm.Imm); ok && dst == x86asm.RSP && n > 0 {
			return int64(n), true
		}
	}
	return 0, false
}

// scratch says a is a register no argument is passed in (rax, r10, r11,
// or a part of one).
func scratch(a x86asm.Arg) bool {
	r, ok := a.(x86asm.Reg)
	if !ok {
		return false
	}
	switch full(r) {
	case x86asm.RAX, x86asm.R10, x86asm.R11:
		return true
	}
	return false
}

// full is the 64-bit register r is a part of (al, ax, eax: rax).
func full(r x86asm.Reg) x86asm.Reg {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return r
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return x86asm.RAX + (r - x86asm.EAX)
	case r >= x86asm.AX && r <= x86asm.R15W:
		return x86asm.RAX + (r - x86asm.AX)
	case r >= x86asm.AL && r <= x86asm.BL:
		return x86asm.RAX + (r - x86asm.AL)
	case r >= x86asm.AH && r <= x86asm.BH: // the high bytes of rax..rbx
		return x86asm.RAX + (r - x86asm.AH)
	case r >= x86asm.SPB && r <= x86asm.R15B:
		return x86asm.RSP + (r - x86asm.SPB)
	}
	return r
}

// returnSite is where, in a function (code: all of it), a uprobe sees
// its return value at every return, for a breakpoint alone (OpenSSL's
// SSL_read, built with -fstack-protector-strong as distributions do): the stack
// protector's check before the function's only ret,
//
//	sub %fs:0x28,%rdx; jne <a call of __stack_chk_fail>; add $0x18,%rsp; ... ret
//
// the jump (emulated), when what follows it to the ret leaves %rax alone
// and no branch enters there. 0 when the function is not so (then its
// return needs a return probe): it has another ret, a jump out of it (a
// tail call), a jump through a register or memory, or no such check.
func returnSite(code []byte) uint64 {
	fn, ok := sweep(code)
	if !ok {
		return 0
	}
	insts, targets, rets := fn.insts, fn.targets, 0
	for _, in := range insts {
		target, rel := in.Args[0].(x86asm.Rel)
		switch {
		case in.Op == x86asm.JMP && !rel:
			return 0 // through a register or memory
		case in.Op == x86asm.JMP:
			if t := in.off + in.Len + int(target); t < 0 || t >= len(code) {
				return 0 // a tail call
			}
		case in.Op == x86asm.RET:
			rets++
		}
	}
	if rets != 1 {
		return 0
	}
	i := len(insts) - 1
	for insts[i].Op != x86asm.RET { // the padding after it
		i--
	}
	for i--; i > 0 && leavesRAX(insts[i].Inst) && !targets[insts[i].off]; i-- {
	}
	if i < 1 {
		return 0
	}
	check, compare := insts[i], insts[i-1]
	if targets[check.off] || !conditional[check.Op] || !emulated(check.Inst) || !canaryCompare(compare.Inst) {
		return 0
	}
	fail := check.off + check.Len + int(check.Args[0].(x86asm.Rel))
	if fail < 0 || fail >= len(code) {
		return 0
	}
	if in, ok := decode(code[fail:]); !ok || in.Op != x86asm.CALL {
		return 0
	}
	return uint64(check.off)
}

// leavesRAX says an instruction between the stack protector's check and
// the ret leaves the return value alone: the frame freed, other
// registers popped or zeroed.
func leavesRAX(in x86asm.Inst) bool {
	r, reg := in.Args[0].(x86asm.Reg)
	switch in.Op {
	case x86asm.ADD:
		return reg && r == x86asm.RSP
	case x86asm.POP, x86asm.XOR:
		return reg && full(r) != x86asm.RAX
	case x86asm.NOP:
		return true
	}
	return false
}

// canaryCompare says the instruction compares a register other than rax
// with the stack protector's canary (%fs:0x28).
func canaryCompare(in x86asm.Inst) bool {
	r, reg := in.Args[0].(x86asm.Reg)
	m, mem := in.Args[1].(x86asm.Mem)
	return (in.Op == x86asm.SUB || in.Op == x86asm.XOR || in.Op == x86asm.CMP) && reg && full(r) != x86asm.RAX &&
		mem && m.Segment == x86asm.FS && m.Base == 0 && m.Disp == 0x28
}

// returnProbeOffset is returnSite of a function of a file: 0
// when its code cannot be read or has no such site.
func returnProbeOffset(file, symbol string) uint64 {
	code, err := elfvar.FunctionCode(file, symbol)
	if err != nil {
		return 0
	}
	return returnSite(code)
}

// entryProbeOffset is entryOffset of a function of a file: 0 when its
// code cannot be read (the probe then goes on its first instruction).
func entryProbeOffset(file, symbol string) uint64 {
	code, err := elfvar.FunctionCode(file, symbol)
	if err != nil {
		return 0
	}
	return entryOffset(code)
}
