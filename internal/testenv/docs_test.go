package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README is a landing page: what dbiolat is, its two commands, a
// screen of each main command and links. References go to docs/.
func TestReadmeIsALandingPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const most = 300
	if n := strings.Count(string(b), "\n"); n >= most {
		t.Errorf("README.md has %d lines, the most is %d: move the reference to docs/", n, most-1)
	}
}

// Every relative link of the documents points to a file that exists and,
// with an #anchor, to a heading of that file: moving a section must not
// leave a dead link behind.
func TestDocLinksResolve(t *testing.T) {
	root := Root()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	docs = append(docs, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md"), filepath.Join(root, "deploy", "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range docs {
		name, _ := filepath.Rel(root, doc)
		text := prose(t, doc)
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue // another site's: not ours to check offline
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
			}
			rel, _ := filepath.Rel(root, file)
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s, which does not exist", name, target)
				continue
			}
			if anchor != "" && !headings(t, file)[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", name, target, rel, anchor)
			}
		}
	}
}

// CONTRIBUTING.md describes the end-to-end tests file by file, in its
// section "End-to-end tests": it must name every one of
// cmd/dbiolat/*_test.go, and none that is gone.
func TestContributingNamesEveryEndToEndTest(t *testing.T) {
	root := Root()
	text := prose(t, filepath.Join(root, "CONTRIBUTING.md"))
	const heading = "\n### End-to-end tests\n"
	i := strings.Index(text, heading)
	if i < 0 {
		t.Fatalf("CONTRIBUTING.md has no section %q", strings.TrimSpace(heading))
	}
	section := text[i+len(heading):]
	if j := strings.Index(section, "\n#"); j >= 0 {
		section = section[:j]
	}
	files, err := filepath.Glob(filepath.Join(root, "cmd", "dbiolat", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cmd/dbiolat/*_test.go: %v", err)
	}
	exists := map[string]bool{}
	for _, f := range files {
		exists[filepath.Base(f)] = true
		if !strings.Contains(section, "`"+filepath.Base(f)+"`") {
			t.Errorf("CONTRIBUTING.md's end-to-end tests do not name cmd/dbiolat/%s", filepath.Base(f))
		}
	}
	for _, m := range regexp.MustCompile("`(\\w+_test\\.go)`").FindAllStringSubmatch(section, -1) {
		if !exists[m[1]] {
			t.Errorf("CONTRIBUTING.md's end-to-end tests name %s, which is not in cmd/dbiolat", m[1])
		}
	}
}

// prose is a Markdown file without its fenced code blocks: a "# comment"
// in a shell example is no heading, and "[x](y)" in code no link.
func prose(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// headings are the anchors GitHub gives a Markdown file's headings: the
// text lowercased, punctuation but hyphens and underscores dropped, spaces
// made hyphens, and "-1", "-2"... after a repeated one.
func headings(t *testing.T, file string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose(t, file), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}
