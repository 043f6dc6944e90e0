package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dbiolat/dbiolat/internal/pgsandbox"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// An extension's LWLock tranche is named as its server names it; the
// names are read only for such a tranche, and without them the id says
// which one it was.
func TestWaitEventNameOn(t *testing.T) {
	asked := 0
	tranches := func() Tranches { asked++; return Tranches{75: "pg_stat_statements", 77: "my_extension"} }
	for _, c := range []struct {
		version int
		code    WaitEvent
		want    string
	}{
		{15, 0x0100004B, "LWLock/pg_stat_statements"},
		{16, 0x0100004D, "LWLock/my_extension"},
		{15, 0x0100004C, "LWLock/extension (tranche 76)"}, // not one the server named
		{16, 0x0100004B, "LWLock/LogicalRepLauncherDSA"},  // built in on 16: the table's
		{15, 0x0A000011, "IO/DataFileRead"},
	} {
		if got := c.code.NameOn(c.version, tranches); got != c.want {
			t.Errorf("WaitEvent(%#08x).NameOn(%d) = %q, want %q", uint32(c.code), c.version, got, c.want)
		}
	}
	if asked != 3 {
		t.Errorf("the tranches were read %d times, want 3: once per extension tranche named", asked)
	}
	if got := WaitEvent(0x0100004B).NameOn(15, nil); got != "LWLock/extension (tranche 75)" {
		t.Errorf("with no tranches known: %q", got)
	}
}

// pg_stat_statements asks for one named tranche at the server's start: on
// every version its tranche is the first after the built-in ones (the
// length of the version's LWLock table, which the servers confirmed), and
// reading the postmaster's memory finds it by that id and name (19: in
// shared memory). A server without extensions has none.
func TestReadTranches(t *testing.T) {
	testenv.NeedRoot(t) // reading another user's process memory
	for _, version := range pgsandbox.Versions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for _, preload := range []string{"pg_stat_statements", ""} {
				c, err := pgsandbox.Start(ctx, pgsandbox.Options{Version: version,
					Settings: map[string]string{"shared_preload_libraries": preload}})
				if err != nil {
					t.Fatal(err)
				}
				in, err := ByPID(c.PostmasterPID())
				if err == nil {
					var got Tranches
					if got, err = ReadTranches(in); err == nil {
						want := Tranches{}
						if preload != "" {
							want[uint16(len(waitEventTables[in.Version][waitClassLWLock]))] = preload
						}
						t.Logf("PostgreSQL %d with %q preloaded: tranches %v", in.Version, preload, got)
						if fmt.Sprint(got) != fmt.Sprint(want) {
							t.Errorf("PostgreSQL %d with %q preloaded: tranches %v, want %v", in.Version, preload, got, want)
						}
					}
				}
				if stopErr := c.Stop(); err == nil {
					err = stopErr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// 19's LWLockNewTrancheId as Debian builds it (19~rc1): the load of the
// pointer to its shared tranches is the first relative to %rip, after
// code with none (endbr64, pushes, a call, conditional jumps).
func TestRIPLoad(t *testing.T) {
	code := []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x41, 0x55, 0x41, 0x54, 0x53, 0x48, 0x83, 0xec, 0x08,
		0x48, 0x85, 0xff, 0x0f, 0x84, 0xc0, 0x3c, 0xc0, 0xff, 0x49, 0x89, 0xfd, 0xe8, 0x5e, 0x61, 0xb9, 0xff,
		0x48, 0x83, 0xf8, 0x3f, 0x0f, 0x87, 0x5f, 0x3c, 0xc0, 0xff, 0x48, 0x8b, 0x05, 0x75, 0x3c, 0x54, 0x00}
	if at, ok := ripLoad(code, 0x5558b0); !ok || at != 0xa99558 {
		t.Errorf("ripLoad: %#x %v, want 0xa99558 (objdump's)", at, ok)
	}
	if _, ok := ripLoad(code[:40], 0x5558b0); ok {
		t.Error("a load found in code without one")
	}
}
