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
// unless CI says it must run: then it fails.
func NeedRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			tb.Fatal("this needs root for BPF, and CI must run it")
		}
		tb.Skip("needs root for BPF")
	}
}
