package mysql

import "testing"

func TestWaitName(t *testing.T) {
	for typ, want := range map[byte]string{3: "Lock/RowLock", 5: "Lock/MetadataLock", 9: "IO/GroupCommit", 200: "Wait/200"} {
		if got := WaitName(typ); got != want {
			t.Errorf("WaitName(%d) = %q, want %q", typ, got, want)
		}
	}
}
