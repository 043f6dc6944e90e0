package sandbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	parent := t.TempDir()
	var checked string
	var log bytes.Buffer
	d, err := New("testbox", parent, "server.log", &log, func(p string) error { checked = p; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if checked != parent || filepath.Dir(d.Path) != parent || !strings.HasPrefix(filepath.Base(d.Path), "testbox-") {
		t.Errorf("checked %q, made %q under %q", checked, d.Path, parent)
	}
	if st, err := os.Stat(d.Path); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the directory: %v, %v", st, err)
	}
	if err := d.CheckSocket(filepath.Join(d.Path, strings.Repeat("s", 108))); err == nil || !strings.HasPrefix(err.Error(), "testbox: ") {
		t.Errorf("CheckSocket of a long path = %v", err)
	}

	failed := errors.New("it did not start")
	if err := d.StartFailed(failed); err != failed {
		t.Errorf("StartFailed with no log = %v", err)
	}
	if err := os.WriteFile(d.LogFile, []byte("one\nFATAL: two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.StartFailed(failed); !errors.Is(err, failed) || !strings.HasSuffix(err.Error(), "server log tail:\none\nFATAL: two") {
		t.Errorf("StartFailed = %q", err)
	}

	stops := 0
	stop := func() []error { stops++; return []error{errors.New("stopping went wrong")} }
	first := d.Stop(stop)
	if again := d.Stop(stop); stops != 1 || first == nil || again != first {
		t.Errorf("Stop ran %d times: %v, then %v", stops, first, again)
	}
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}
	if !strings.HasPrefix(log.String(), "testbox: server log "+d.LogFile+":\none\n") {
		t.Errorf("log = %q", log.String())
	}

	if _, err := New("testbox", parent, "server.log", nil, func(string) error { return errors.New("no") }); err == nil {
		t.Error("New made a directory its check refused")
	}
}
