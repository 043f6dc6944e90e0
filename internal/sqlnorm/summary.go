package sqlnorm

import "strings"

// maxSummary bounds a summary's length, as OpenTelemetry's semantic
// conventions recommend for db.query.summary.
const maxSummary = 255

// operations are the statement keywords a summary names wherever they
// begin a statement; the data-changing ones and SELECT also where they
// begin a subquery or a CTE's body.
var operations = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "REPLACE": true,
}

// targets are the keywords after which a summary names the table.
var targets = map[string]bool{"FROM": true, "INTO": true, "JOIN": true, "UPDATE": true, "TABLE": true}

// Summary is a short, low-cardinality name of a normalized query, in the
// form of OpenTelemetry's db.query.summary: its operations and the
// tables they name, in order ("SELECT pgbench_accounts", "UPDATE
// pgbench_tellers", "INSERT orders SELECT carts"); a statement that
// names no table is its first keyword ("BEGIN", "COMMIT", "SET"). It
// reads words, not the grammar: cheap enough for every record exported.
func Summary(normalized string) string {
	var b strings.Builder
	add := func(w string) {
		if b.Len()+1+len(w) > maxSummary {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	words := strings.FieldsFunc(normalized, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == ',' || r == '(' || r == ')'
	})
	start, last := true, ""
	for i, w := range words {
		up := strings.ToUpper(strings.TrimRight(w, ";"))
		if start && up != "" || operations[up] {
			add(up)
		}
		if targets[up] && i+1 < len(words) && identifier(words[i+1]) {
			if t := strings.TrimRight(words[i+1], ";"); t != last {
				add(t)
				last = t
			}
		}
		start = strings.HasSuffix(w, ";")
	}
	return b.String()
}

// identifier says a word names a table: plain, "quoted" or `quoted`,
// possibly schema-qualified; not a placeholder nor a keyword that may
// follow FROM (LATERAL, ONLY...: good enough to leave out).
func identifier(w string) bool {
	if w == "" {
		return false
	}
	switch strings.ToUpper(w) {
	case "LATERAL", "ONLY", "SELECT", "UNNEST", "GENERATE_SERIES":
		return false
	}
	c := w[0]
	return c == '"' || c == '`' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}
