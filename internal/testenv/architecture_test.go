package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ARCHITECTURE.md is the map of the code: it names every command file,
// every file of the kernel side and of the session (the seam between
// probes and engines), and no file that is gone.
func TestArchitectureNamesEveryFile(t *testing.T) {
	root := Root()
	b, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	named := map[string]bool{}
	// A file's name, whole: not a pattern's end ("*_test.go", "mysql_*.bpf.h").
	for _, m := range regexp.MustCompile(`(?:^|[^\w.*<>-])([a-zA-Z][\w.-]*\.(?:go|bpf\.c|bpf\.h|h))\b`).FindAllStringSubmatch(doc, -1) {
		named[m[1]] = true
	}
	existing := map[string]bool{}
	for _, pattern := range []string{"cmd/dbiolat/*.go", "internal/probe/*.go", "internal/probe/bpf/*", "internal/session/*.go"} {
		files, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", pattern, err)
		}
		for _, f := range files {
			name := filepath.Base(f)
			existing[name] = true
			switch {
			case strings.HasSuffix(name, "_test.go"), name == "vmlinux.h", strings.HasPrefix(name, "dbiolat_x86_"):
				continue // tests are named by kind; generated files by their prefix
			case !named[name]:
				t.Errorf("ARCHITECTURE.md does not name %s", filepath.Join(filepath.Dir(pattern), name))
			}
		}
	}
	// Every file it names exists somewhere in the tree.
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() {
			existing[d.Name()] = true
		}
		return nil
	})
	for name := range named {
		if !existing[name] {
			t.Errorf("ARCHITECTURE.md names %s, which is not in the tree", name)
		}
	}
}
