package testenv

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the README's generated sections instead of checking them")

// ReadmeSection checks that the README's section between the lines
// "<!-- NAME -->" and "<!-- end NAME -->" is want, so that a table the
// code defines cannot drift from the one the README shows. With
// -update-readme it rewrites the section instead:
//
//	go test ./internal/model/ ./internal/probe/ -run Readme -update-readme
func ReadmeSection(t *testing.T, name, want string) {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(here), "..", "..", "README.md")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	begin, end := "<!-- "+name+" -->\n", "<!-- end "+name+" -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no section %q...%q", begin, end)
	}
	i += len(begin)
	if text[i:j] == want {
		return
	}
	if *updateReadme {
		if err := os.WriteFile(file, []byte(text[:i]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("README.md: section %s rewritten", name)
		return
	}
	t.Errorf("README.md's section %s is not what the code defines: run\n\tgo test ./internal/model/ ./internal/probe/ -run Readme -update-readme\nhave:\n%s\nwant:\n%s", name, text[i:j], want)
}
