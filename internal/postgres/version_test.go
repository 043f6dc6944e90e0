package postgres

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The version string as each build lays it out, and the messages naming
// older releases that must not be taken for it.
func TestMajorOf(t *testing.T) {
	for s, want := range map[string]int{
		"x\x00PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu\x00":                    15,
		"\x00PostgreSQL 16.14 on x86_64-pc-linux-gnu, compiled by gcc\x00":                             16,
		"\x00PostgreSQL 19rc1 (Debian 19~rc1-1) on x86_64-pc-linux-gnu\x00":                            19,
		"\x00PostgreSQL 20devel on x86_64\x00":                                                         20,
		"index was created before PostgreSQL 9.1. Please REINDEX it.\x00PostgreSQL 18.4 on x86_64\x00": 18,
		"index was created before PostgreSQL 9.1. Please REINDEX it.\x00":                              0,
	} {
		if got := majorOf([]byte(s)); got != want {
			t.Errorf("majorOf(%q) = %d, want %d", s, got, want)
		}
	}
}

// The executables the tests run, where the machine has them, say their
// own version; a file without a version string says 0.
func TestMajorOfBinary(t *testing.T) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	for _, b := range bins {
		want := filepath.Base(filepath.Dir(filepath.Dir(b)))
		if got := MajorOfBinary(b); strconv.Itoa(got) != want {
			t.Errorf("%s: major %d, want %s", b, got, want)
		}
	}
	none := filepath.Join(t.TempDir(), "postgres")
	if err := os.WriteFile(none, []byte("\x7fELF no version here"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := MajorOfBinary(none); got != 0 {
		t.Errorf("a file without a version string says PostgreSQL %d", got)
	}
}
