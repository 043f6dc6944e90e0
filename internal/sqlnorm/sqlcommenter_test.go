package sqlnorm

import (
	"strings"
	"testing"
)

const (
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID = "00f067aa0ba902b7"
	tp       = "00-" + traceID + "-" + parentID + "-01"
)

func TestTraceParent(t *testing.T) {
	for _, c := range []struct {
		text  string
		ok    bool
		flags byte
	}{
		{"SELECT 1 /*traceparent='" + tp + "'*/", true, 1},
		{"SELECT 1 /* traceparent='" + tp + "' */", true, 1},
		// Django's sqlcommenter: sorted keys, URL-encoded values.
		{"SELECT * FROM t /*controller='index',db_driver='django.db.backends.postgresql',framework='django%3A4.2',route='%5Eindex%2F',traceparent='" + tp + "',tracestate='congo%3Dt61rcWkgMzE'*/", true, 1},
		// URL-encoded dashes, a multi-line statement, the comment first.
		{"/*traceparent='00%2D" + traceID + "%2D" + parentID + "%2D00'*/\nUPDATE t\nSET a = 1", true, 0},
		// A later version with more fields: its first four are read.
		{"SELECT 1 /*traceparent='01-" + traceID + "-" + parentID + "-01-what-next'*/", true, 1},
		// An escaped quote in another value.
		{`SELECT 1 /*action='it\'s',traceparent='` + tp + `'*/`, true, 1},
		// Another comment first, the valid one second.
		{"SELECT /* hint */ 1 /*traceparent='" + tp + "'*/", true, 1},
		// Malformed: ignored.
		{"SELECT 1", false, 0},
		{"SELECT 1 -- traceparent='" + tp + "'", false, 0},
		{"SELECT 1 /*traceparent='" + tp + "'", false, 0}, // cut off
		{"SELECT 1 /*traceparent=" + tp + "*/", false, 0}, // not quoted
		{"SELECT 1 /*traceparent='" + strings.ToUpper(tp) + "'*/", false, 0},
		{"SELECT 1 /*traceparent='00-" + traceID + "-" + parentID + "-01-x'*/", false, 0}, // 00 has four fields
		{"SELECT 1 /*traceparent='ff-" + traceID + "-" + parentID + "-01'*/", false, 0},
		{"SELECT 1 /*traceparent='00-00000000000000000000000000000000-" + parentID + "-01'*/", false, 0},
		{"SELECT 1 /*traceparent='00-" + traceID + "-0000000000000000-01'*/", false, 0},
		{"SELECT 1 /*traceparent='00-" + traceID[1:] + "-" + parentID + "-01'*/", false, 0},
		{"SELECT 1 /*traceparent='00_" + traceID + "-" + parentID + "-01'*/", false, 0},
		{"SELECT 1 /*traceparent='00-" + traceID + "-" + parentID + "-0g'*/", false, 0},
		{"SELECT 1 /*traceparent='%zz'*/", false, 0},
		{"SELECT 1 /*a='b' traceparent='" + tp + "'*/", false, 0}, // no comma
	} {
		tc, ok := TraceParent(c.text)
		if ok != c.ok {
			t.Errorf("TraceParent(%q): ok = %v, want %v", c.text, ok, c.ok)
			continue
		}
		if ok && (tc.TraceID != traceID || tc.ParentID != parentID || tc.Flags != c.flags) {
			t.Errorf("TraceParent(%q) = %+v", c.text, tc)
		}
	}
}

// A query's fingerprint ignores its comments: two calls differing only
// in their trace context are counted together.
func TestTraceParentLeavesFingerprint(t *testing.T) {
	a := "SELECT abalance FROM pgbench_accounts WHERE aid = 1 /*traceparent='" + tp + "'*/"
	b := "SELECT abalance FROM pgbench_accounts WHERE aid = 2 /*traceparent='00-" + strings.Repeat("ab", 16) + "-" + strings.Repeat("cd", 8) + "-00'*/"
	for _, d := range []Dialect{PostgreSQL, MySQL} {
		na, fa := d.Of(a)
		nb, fb := d.Of(b)
		if fa != fb || na != nb || strings.Contains(na, "traceparent") {
			t.Errorf("%v: %q (%x) and %q (%x) differ, or keep the comment", d, na, fa, nb, fb)
		}
	}
}

// The comments scanned are bounded: a text of many comments is cheap.
func TestTraceParentScanBounded(t *testing.T) {
	text := strings.Repeat("/* x */", maxCommentScan) + "/*traceparent='" + tp + "'*/"
	if _, ok := TraceParent(text); ok {
		t.Errorf("a traceparent after %d comments was read", maxCommentScan)
	}
}

// FuzzTraceParent checks, for any text, that TraceParent does not panic
// and returns only well-formed ids, and that a valid comment appended to
// any text without comments is found.
func FuzzTraceParent(f *testing.F) {
	for _, s := range append(fuzzSeeds, "/*traceparent='"+tp+"'*/", "/*a='%",
		"/*traceparent='00-"+traceID+"-"+parentID+"-01',x='\\", "traceparent /* */") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if tc, ok := TraceParent(text); ok {
			if len(tc.TraceID) != 32 || len(tc.ParentID) != 16 || !lowerHex(tc.TraceID+tc.ParentID) || allZero(tc.TraceID) || allZero(tc.ParentID) {
				t.Fatalf("TraceParent(%q) = %+v: malformed ids", text, tc)
			}
		}
		if strings.Contains(text, "/*") || strings.Contains(text, "*/") {
			return
		}
		tc, ok := TraceParent(text + " /*traceparent='" + tp + "'*/")
		if !ok || tc.TraceID != traceID || tc.ParentID != parentID {
			t.Fatalf("TraceParent(%q + comment) = %+v, %v", text, tc, ok)
		}
	})
}
