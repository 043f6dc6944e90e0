package postgres

import (
	"os"
	"regexp"
	"strconv"
	gosync "sync"

	"golang.org/x/sys/unix"
)

// versionString matches PostgreSQL's PG_VERSION_STR as its executable
// holds it ("PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64...",
// "PostgreSQL 16.14 on ...", "PostgreSQL 19rc1 (Debian ...)"), and not
// its messages naming older releases ("... before PostgreSQL 9.1. Please
// REINDEX it").
var versionString = regexp.MustCompile(`PostgreSQL ([0-9]+)(?:\.[0-9]+|devel|beta[0-9]*|rc[0-9]*) (?:on |\()`)

// binaryMajors caches MajorOfBinary by file (device and inode): every
// backend of a server runs the same one.
var binaryMajors gosync.Map

// MajorOfBinary is the major version of the PostgreSQL executable at
// path, read from its version string; 0 if it has none. The data
// directory's PG_VERSION says the same, but a tracer with only the
// capabilities it needs (no CAP_DAC_READ_SEARCH) cannot read the data
// directory, which is the server's alone; the executable is readable.
func MajorOfBinary(path string) int {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	key := [2]uint64{st.Dev, st.Ino}
	if v, ok := binaryMajors.Load(key); ok {
		return v.(int)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	major := majorOf(b)
	binaryMajors.Store(key, major)
	return major
}

// majorOf finds the version string in an executable's bytes.
func majorOf(b []byte) int {
	m := versionString.FindSubmatch(b)
	if m == nil {
		return 0
	}
	major, _ := strconv.Atoi(string(m[1]))
	return major
}
