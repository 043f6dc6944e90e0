package output

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
)

func TestByApplication(t *testing.T) {
	app := func(name string, ns uint64) model.Query {
		x := q("f", ns, ns/2)
		x.Application = name
		return x
	}
	apps := ByApplication(slices.Values([]model.Query{app("web", 10), app("", 100), app("web", 30), app("batch", 40)}))
	if len(apps) != 3 || apps[0].Application != "" || apps[1].Application != "batch" || apps[2].Application != "web" {
		t.Fatalf("order %+v: want none (100), batch (40), web (40: ties by name)", apps)
	}
	if w := apps[2]; w.Calls != 2 || w.TotalNs != 40 || w.IOWaitNs != 20 {
		t.Errorf("web: %+v", w)
	}
	var b bytes.Buffer
	ApplicationTable(&b, apps, 2)
	out := b.String()
	for _, want := range []string{"3 applications; the 2 with the most time", "(none named)", "batch"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "web") {
		t.Errorf("the table shows more than its top 2:\n%s", out)
	}
	b.Reset()
	ApplicationTable(&b, ByApplication(slices.Values([]model.Query{q("a", 1, 0)})), 10)
	if b.Len() != 0 {
		t.Errorf("a table of queries that named no application: %q", b.String())
	}
}
