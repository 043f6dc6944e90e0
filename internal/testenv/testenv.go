// Package testenv holds what the tests of several packages share about
// the machine they run on.
package testenv

import (
	"os"
	"testing"
)

// MemoryBudget is the most dbiolat's own process may hold at its peak
// (docs/overhead.md): the tests that flood it check it.
const MemoryBudget = 150 << 20

// NeedRoot skips a test or benchmark that needs BPF when not run as root,
// unless CI says it must run: then it fails. Under -short it skips, as
// root too (NotShort).
func NeedRoot(tb testing.TB) {
	tb.Helper()
	NotShort(tb)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			tb.Fatal("this needs root for BPF, and CI must run it")
		}
		tb.Skip("needs root for BPF")
	}
}

// NotShort skips a test that loads BPF or starts a database server when
// only the quick tests run (go test -short: make unit), whoever runs them
// and whatever CI says: -short asks for the tests that need neither. Every
// test that needs root calls it through NeedRoot; the few that start a
// server without root (the sandboxes' own, internal/mysql's) call it
// themselves.
func NotShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("loads BPF or starts a database server: not a -short test")
	}
}
