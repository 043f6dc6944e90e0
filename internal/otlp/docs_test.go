package otlp

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The attributes' table of docs/otel.md is the mapping's: the semantic
// conventions' names, then the catalog's fields and boxes.
func TestDocAttributesTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| attribute | query record field | what |\n|---|---|---|\n")
	for _, c := range Conventions {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", strings.ReplaceAll(c.Key, ", ", "`, `"), c.JSON, c.Text)
	}
	for _, f := range model.Fields {
		what := f.Text
		if f.Optional {
			what += " (absent when zero)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", model.OTLPName(f.Name), f.Name, what)
	}
	for _, x := range model.Boxes {
		what := "waterfall: " + x.Title
		if x.Detail != "" {
			what += ": " + x.Detail
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s (also a child span's) |\n", model.OTLPName(x.Name), x.Name, what)
	}
	testenv.DocSection(t, "docs/otel.md", "otlp:attributes", b.String())

	b.Reset()
	b.WriteString("| reason | kind | what a count of it is |\n|---|---|---|\n")
	for _, d := range model.OTLPDrops {
		kind := "choice"
		if d.Loss {
			kind = "**loss**"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", d.Name, kind, d.Text)
	}
	testenv.DocSection(t, "docs/otel.md", "otlp:drops", b.String())
}
