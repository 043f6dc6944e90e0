package usdt

import (
	"errors"
	"testing"
)

// specSeeds are the forms GCC emits for PostgreSQL's probes, plus the
// variants the parser must refuse; they also seed the fuzzer.
var specSeeds = []string{
	"8@%rbx", "-4@%r14d", "4@%edx", "4@(%r12)", "4@8(%r13)", "-4@-136(%rbp)",
	"-4@$8192", "-8@$-1", "8@%rax", "%rax", "1@%al", "1@%sil", "2@%r9w",
	"1@%r15b", "8@16(%rip)", "8@(%rax,%rbx,8)", "8@%fs:16", "8@%fs:(%rax)",
	"-4@NBuffers(%rip)", "-4@40+CheckpointStats(%rip)", "1@%ah", "8@%xmm0",
	"", "@", "4@", "3@%rax", "x@%rax", "4@%", "4@()", "4@8(%rax", "4@$", "4@$x",
}

func TestParseArg(t *testing.T) {
	tests := []struct {
		spec string
		want Arg
	}{
		{"8@%rbx", Arg{Kind: ArgReg, Size: 8, Reg: "rbx", RegOffset: 40}},
		{"-4@%r14d", Arg{Kind: ArgReg, Size: 4, Signed: true, Reg: "r14", RegOffset: 8}},
		{"4@%edx", Arg{Kind: ArgReg, Size: 4, Reg: "rdx", RegOffset: 96}},
		{"8@%rax", Arg{Kind: ArgReg, Size: 8, Reg: "rax", RegOffset: 80}},
		{"1@%al", Arg{Kind: ArgReg, Size: 1, Reg: "rax", RegOffset: 80}},
		{"1@%dil", Arg{Kind: ArgReg, Size: 1, Reg: "rdi", RegOffset: 112}},
		{"-1@%sil", Arg{Kind: ArgReg, Size: 1, Signed: true, Reg: "rsi", RegOffset: 104}},
		{"2@%bp", Arg{Kind: ArgReg, Size: 2, Reg: "rbp", RegOffset: 32}},
		{"8@%rsp", Arg{Kind: ArgReg, Size: 8, Reg: "rsp", RegOffset: 152}},
		{"2@%r9w", Arg{Kind: ArgReg, Size: 2, Reg: "r9", RegOffset: 64}},
		{"1@%r15b", Arg{Kind: ArgReg, Size: 1, Reg: "r15", RegOffset: 0}},
		{"8@%r11", Arg{Kind: ArgReg, Size: 8, Reg: "r11", RegOffset: 48}},
		{"%rax", Arg{Kind: ArgReg, Size: 8, Reg: "rax", RegOffset: 80}}, // old form: no size
		{"4@(%r12)", Arg{Kind: ArgRegDeref, Size: 4, Reg: "r12", RegOffset: 24}},
		{"4@8(%r13)", Arg{Kind: ArgRegDeref, Size: 4, Reg: "r13", RegOffset: 16, Value: 8}},
		{"-4@-136(%rbp)", Arg{Kind: ArgRegDeref, Size: 4, Signed: true, Reg: "rbp", RegOffset: 32, Value: -136}},
		{"8@-144(%rbp)", Arg{Kind: ArgRegDeref, Size: 8, Reg: "rbp", RegOffset: 32, Value: -144}},
		{"8@16(%rip)", Arg{Kind: ArgRegDeref, Size: 8, Reg: "rip", RegOffset: 128, Value: 16}},
		{"-4@$8192", Arg{Kind: ArgConst, Size: 4, Signed: true, Value: 8192}},
		{"-8@$-1", Arg{Kind: ArgConst, Size: 8, Signed: true, Value: -1}},
		{"4@$0", Arg{Kind: ArgConst, Size: 4}},
	}
	for _, tt := range tests {
		got, err := ParseArg(tt.spec)
		if err != nil {
			t.Errorf("ParseArg(%q): %v", tt.spec, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseArg(%q) = %+v, want %+v", tt.spec, got, tt.want)
		}
	}
}

func TestParseArgErrors(t *testing.T) {
	tests := []struct {
		spec        string
		unsupported bool // the loader skips these sites instead of failing
	}{
		{"8@(%rax,%rbx,8)", true},
		{"8@8(%rax,%rbx)", true},
		{"8@%fs:16", true},
		{"8@%fs:(%rax)", true},
		{"-4@NBuffers(%rip)", true},
		{"-4@40+CheckpointStats(%rip)", true},
		{"4@$sym", true},
		{"1@%ah", true},
		{"1@%dh", true},
		{"8@%xmm0", true},
		{"8@sym", true},
		{"", false},
		{"4@", false},
		{"@%rax", false},
		{"x@%rax", false},
		{"3@%rax", false},
		{"16@%rax", false},
		{"0@%rax", false},
		{"4@%", false},
		{"4@%rax)", false},
		{"4@()", false},
		{"4@8(%rax", false},
		{"4@8(rax)", false},
		{"4@(%rax))", false},
		{"4@$", false},
		{"4@%r ax", false},
	}
	for _, tt := range tests {
		_, err := ParseArg(tt.spec)
		if err == nil {
			t.Errorf("ParseArg(%q) succeeded, want error", tt.spec)
			continue
		}
		if got := errors.Is(err, ErrUnsupported); got != tt.unsupported {
			t.Errorf("ParseArg(%q) = %v; errors.Is(ErrUnsupported) = %v, want %v", tt.spec, err, got, tt.unsupported)
		}
	}
}

func TestParseArgs(t *testing.T) {
	args, err := ParseArgs("4@(%r12) 4@4(%r12)  2@12(%r12) -4@%r13d")
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 4 || args[1].Value != 4 || args[2].Size != 2 || !args[3].Signed {
		t.Errorf("ParseArgs = %+v", args)
	}
	if args, err := ParseArgs(""); err != nil || args != nil {
		t.Errorf(`ParseArgs("") = %v, %v; want nil, nil`, args, err)
	}
	if _, err := ParseArgs("8@%rax -4@NBuffers(%rip)"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ParseArgs with a symbolic operand: err = %v, want ErrUnsupported", err)
	}
}

func FuzzParseArg(f *testing.F) {
	for _, s := range specSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		a, err := ParseArg(spec)
		if err != nil {
			return
		}
		// Whatever is accepted must be something the BPF side can read.
		switch a.Size {
		case 1, 2, 4, 8:
		default:
			t.Fatalf("ParseArg(%q): size %d", spec, a.Size)
		}
		switch a.Kind {
		case ArgConst:
			if a.Reg != "" {
				t.Fatalf("ParseArg(%q): constant with register %q", spec, a.Reg)
			}
		case ArgReg, ArgRegDeref:
			if off, ok := ptRegs[a.Reg]; !ok || off != a.RegOffset {
				t.Fatalf("ParseArg(%q): register %q at offset %d", spec, a.Reg, a.RegOffset)
			}
		default:
			t.Fatalf("ParseArg(%q): kind %v", spec, a.Kind)
		}
	})
}
