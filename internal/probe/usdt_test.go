package probe

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/usdt"
)

// USDT argument specs, as internal/usdt decodes them from the note,
// become what usdt.bpf.h reads: the kind, where the register is, and the
// shift that cuts a narrower argument (and sign-extends it).
func TestSpecOf(t *testing.T) {
	args, err := usdt.ParseArgs("8@%rbx -4@%r14d 4@8(%r13) -4@$8192 -4@-136(%rbp)")
	if err != nil {
		t.Fatal(err)
	}
	s, err := specOf(args)
	if err != nil {
		t.Fatal(err)
	}
	if s.Nargs != 5 {
		t.Fatalf("%d arguments", s.Nargs)
	}
	want := []struct {
		kind     dbiolatUsdtArgKind
		valOff   int64
		bitshift uint8
		signed   uint8
	}{
		{dbiolatUsdtArgKindUSDT_ARG_REG, 0, 0, 0},
		{dbiolatUsdtArgKindUSDT_ARG_REG, 0, 32, 1},
		{dbiolatUsdtArgKindUSDT_ARG_REG_DEREF, 8, 32, 0},
		{dbiolatUsdtArgKindUSDT_ARG_CONST, 8192, 32, 1},
		{dbiolatUsdtArgKindUSDT_ARG_REG_DEREF, -136, 32, 1},
	}
	for i, w := range want {
		a := s.Args[i]
		if a.Kind != uint8(w.kind) || a.ValOff != w.valOff || a.Bitshift != w.bitshift || a.IsSigned != w.signed {
			t.Errorf("argument %d (%+v): got %+v, want %+v", i, args[i], a, w)
		}
		if w.kind != dbiolatUsdtArgKindUSDT_ARG_CONST && int(a.RegOff) != args[i].RegOffset {
			t.Errorf("argument %d: register offset %d, want %d", i, a.RegOff, args[i].RegOffset)
		}
	}
	if _, err := specOf(make([]usdt.Arg, len(dbiolatUsdtSpec{}.Args)+1)); err == nil {
		t.Error("more arguments than a spec holds were accepted")
	}
}
