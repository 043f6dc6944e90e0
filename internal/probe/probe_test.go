package probe

import (
	"strings"
	"testing"
)

// Every program belongs to exactly one family, or to the core, so that
// loading only the chosen families never leaves one out by accident.
func TestEveryProgramHasAFamily(t *testing.T) {
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	for name := range s.Programs {
		if _, err := familyOf(name); err != nil {
			t.Error(err)
		}
		n := 0
		for _, f := range families {
			if strings.HasPrefix(name, f.prefix) {
				n++
			}
		}
		for _, p := range core {
			if strings.HasPrefix(name, p) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("program %s matches %d family prefixes, want 1", name, n)
		}
	}
}

func TestFamiliesNames(t *testing.T) {
	if got := strings.Join(Default.Names(), ","); got != "wire,block,sched" {
		t.Errorf("Default names %q", got)
	}
	if got := strings.Join((All | Buffers | USDT).Names(), ","); got != "wire,usdt,fs,block,sched,buffers" {
		t.Errorf("all names %q", got)
	}
	for _, c := range []struct {
		f    Families
		prog string
		want bool
	}{
		{Default, "pgwire_recv", true}, {Default, "fs_exit_read", false}, {Default, "proc_fork", true},
		{Default, "lock_wait_start", true}, {FS, "fs_ra_sync", true}, {USDT, "usdt_query_start", true},
		{Default, "buffers_read_done", false}, {0, "selftest_log2_slot", true}, {All, "no_such_program", false},
	} {
		if got := c.f.uses(c.prog); got != c.want {
			t.Errorf("%v uses %s: %v, want %v", c.f.Names(), c.prog, got, c.want)
		}
	}
}
