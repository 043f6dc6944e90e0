package model

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// Every name is unique within its list, and the waterfall's fields are
// distinct fields of a query.
func TestCatalogIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Counters {
		if seen["drop "+c.Name] {
			t.Errorf("counter %s listed twice", c.Name)
		}
		seen["drop "+c.Name] = true
	}
	for _, h := range Histograms {
		if seen["hist "+h.Name] || h.Title == "" || h.Source == "" {
			t.Errorf("histogram %s: listed twice or undescribed", h.Name)
		}
		seen["hist "+h.Name] = true
	}
	var q Query
	fields := map[*uint64]bool{}
	for _, b := range Boxes {
		if fields[b.Of(&q)] || !strings.HasSuffix(b.Name, "_ns") || b.Color == "" {
			t.Errorf("box %s: a field of another box, not in ns, or without a color", b.Name)
		}
		fields[b.Of(&q)] = true
	}
}

// The JSON reference's tables of counters, histograms and boxes
// (docs/json.md) are the catalog's.
func TestDocTablesAreTheCatalog(t *testing.T) {
	var b strings.Builder
	b.WriteString("| counter | kind | what a count of it is |\n|---|---|---|\n")
	for _, c := range Counters {
		kind := "note"
		if c.Loss {
			kind = "**loss**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", c.Name, kind, c.Text)
	}
	testenv.DocSection(t, "docs/json.md", "catalog:drops", b.String())

	b.Reset()
	b.WriteString("| histogram | unit | what | where its numbers come from |\n|---|---|---|---|\n")
	for _, h := range Histograms {
		unit := "ns"
		if h.Unit == hist.Bytes {
			unit = "bytes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", h.Name, unit, h.Title, h.Source)
	}
	testenv.DocSection(t, "docs/json.md", "catalog:hists", b.String())

	b.Reset()
	b.WriteString("| field | in the slow log | what |\n|---|---|---|\n")
	for _, x := range Boxes {
		what := x.Title
		if x.Detail != "" {
			what += ": " + x.Detail
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", x.Name, x.Short, what)
	}
	testenv.DocSection(t, "docs/json.md", "catalog:boxes", b.String())
}

// Every field of a query record is named in docs/json.md's section on
// it: a field added to Query (its application, say) cannot go
// undocumented.
func TestDocNamesEveryQueryField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, "\n## query\n"), strings.Index(doc, "\n## process\n")
	if i < 0 || j < i {
		t.Fatal("docs/json.md has no section query before process")
	}
	section := doc[i:j]
	var names func(reflect.Type) []string
	names = func(ty reflect.Type) []string {
		var out []string
		for f := range ty.Fields() {
			if f.Anonymous {
				out = append(out, names(f.Type)...)
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				out = append(out, name)
			}
		}
		return out
	}
	for _, name := range names(reflect.TypeFor[Query]()) {
		if name != "type" && !strings.Contains(section, "`"+name+"`") {
			t.Errorf("docs/json.md's query section does not name the field %q", name)
		}
	}
}
