package testenv

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the docs' generated sections instead of checking them")

// Root is the repository's top directory, found from this file's place
// in it, so that a test of any package can read the documents there.
func Root() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// DocSection checks that the section of the document doc (a path from
// the repository's top, "docs/json.md") between the lines "<!-- NAME -->"
// and "<!-- end NAME -->" is want, so that a table the code defines
// cannot drift from the one the documentation shows. With -update-docs it
// rewrites the section instead:
//
//	go test ./internal/model/ ./internal/probe/ ./internal/otlp/ -run Doc -update-docs
func DocSection(t *testing.T, doc, name, want string) {
	t.Helper()
	file := filepath.Join(Root(), doc)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	begin, end := "<!-- "+name+" -->\n", "<!-- end "+name+" -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no section %q...%q", doc, begin, end)
	}
	i += len(begin)
	if text[i:j] == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(file, []byte(text[:i]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: section %s rewritten", doc, name)
		return
	}
	t.Errorf("%s's section %s is not what the code defines: run\n\tgo test ./internal/model/ ./internal/probe/ ./internal/otlp/ -run Doc -update-docs\nhave:\n%s\nwant:\n%s", doc, name, text[i:j], want)
}
