package model

import (
	"encoding/json"
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

// Every field of the catalog is the query record's JSON field of that
// name, with the same value, left out of JSON exactly when Optional and
// zero.
func TestFieldsAreTheJSONFields(t *testing.T) {
	var zero Query
	if err := sameFields(t, &zero); err != nil {
		t.Fatal(err)
	}
	full := Query{Fingerprint: "00112233aabbccdd", Truncated: true, Role: "client backend", Instance: 7, DataDir: "/d", TID: 8,
		ConnectionID: 9, QueryNs: 10, Statements: 11, Failed: 12, Waits: map[string]uint64{"IO/DataFileRead": 13}, EnginePID: 14,
		SharedHit: 15, SharedRead: 16}
	n := uint64(100)
	for _, f := range Fields { // the counters: distinct values
		if v, ok := f.Value(&full).(uint64); ok && v == 0 {
			setUint(t, &full, f.Name, n)
			n++
		}
	}
	if err := sameFields(t, &full); err != nil {
		t.Fatal(err)
	}
}

// setUint sets the uint64 field of q whose JSON name is name.
func setUint(t *testing.T, q *Query, name string, v uint64) {
	var m map[string]any
	b, _ := json.Marshal(q)
	json.Unmarshal(b, &m)
	m[name] = v
	b, _ = json.Marshal(m)
	if err := json.Unmarshal(b, q); err != nil {
		t.Fatal(err)
	}
}

// sameFields compares the catalog's fields of q with its JSON.
func sameFields(t *testing.T, q *Query) error {
	t.Helper()
	b, _ := json.Marshal(q)
	var m map[string]any
	json.Unmarshal(b, &m)
	seen := map[string]bool{}
	for _, f := range Fields {
		if seen[f.Name] {
			return fmt.Errorf("field %s listed twice", f.Name)
		}
		seen[f.Name] = true
		got, ok := m[f.Name]
		v := f.Value(q)
		zero := v == nil || reflect.ValueOf(v).IsZero()
		switch {
		case ok == (f.Optional && zero):
			return fmt.Errorf("field %s: in JSON %v, optional %v, zero %v", f.Name, ok, f.Optional, zero)
		case !ok:
			continue
		}
		want, _ := json.Marshal(v)
		gotJSON, _ := json.Marshal(got)
		if string(want) != string(gotJSON) {
			return fmt.Errorf("field %s: catalog %s, JSON %s", f.Name, want, gotJSON)
		}
	}
	for _, b := range Boxes {
		if seen[b.Name] {
			return fmt.Errorf("box %s is a field too", b.Name)
		}
	}
	return nil
}
