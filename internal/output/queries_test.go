package output

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
)

func q(fp string, ns, iowait uint64) model.Query {
	return model.Query{Statements: 1, Fingerprint: fp, Query: "Q " + fp, QueryNs: ns, IOWaitNs: iowait, CPUNs: ns - iowait}
}

func TestByFingerprint(t *testing.T) {
	fps := ByFingerprint(slices.Values([]model.Query{q("a", 10, 5), q("b", 100, 0), q("a", 30, 5), q("c", 40, 40)}))
	if len(fps) != 3 || fps[0].Fingerprint != "b" || fps[1].Fingerprint != "a" || fps[2].Fingerprint != "c" {
		t.Fatalf("order %+v: want b (100), a (40), c (40: ties by fingerprint)", fps)
	}
	if a := fps[1]; a.Calls != 2 || a.TotalNs != 40 || a.MeanNs() != 20 || a.IOWaitNs != 10 || a.IOShare() != 0.25 {
		t.Errorf("a: %+v", a)
	}
	if s := Slowest(slices.Values([]model.Query{q("a", 10, 0), q("b", 30, 0), q("c", 20, 0)}), 2); len(s) != 2 || s[0].QueryNs != 30 || s[1].QueryNs != 20 {
		t.Errorf("slowest: %+v", s)
	}
}

func TestQueryDeltas(t *testing.T) {
	a := []model.Query{
		q("same", 1000, 0), q("same", 1000, 0), // unchanged
		q("slower", 100, 10), q("slower", 100, 10), // 2 calls, mean 100 → 3 calls, mean 400
		q("fewer", 5000, 0), q("fewer", 5000, 0), // 10000 total → 5000: a change of -5000
		q("gone", 99999, 0), // only in A
	}
	b := []model.Query{
		q("same", 1000, 0), q("same", 1000, 0),
		q("slower", 400, 300), q("slower", 400, 300), q("slower", 400, 300),
		q("fewer", 5000, 0),
		q("new", 99999, 0), // only in B
	}
	ds, common := QueryDeltas(slices.Values(a), slices.Values(b), 10)
	if common != 3 || len(ds) != 3 {
		t.Fatalf("%d in both, %d listed: %+v; want 3 and 3 (same, slower, fewer)", common, len(ds), ds)
	}
	// |−5000| > |+1000| > 0: the largest absolute change first.
	if ds[0].Fingerprint != "fewer" || ds[1].Fingerprint != "slower" || ds[2].Fingerprint != "same" {
		t.Errorf("order %s, %s, %s; want fewer, slower, same", ds[0].Fingerprint, ds[1].Fingerprint, ds[2].Fingerprint)
	}
	s := ds[1]
	if s.CallsA != 2 || s.CallsB != 3 || s.MeanA != 100 || s.MeanB != 400 || s.MeanRatio != 4 || s.IOWaitA != 10 || s.IOWaitB != 300 ||
		s.TotalChange() != 1000 || s.Query != "Q slower" {
		t.Errorf("slower: %+v", s)
	}
	// The mean call's boxes: slower's I/O wait grew from 10 to 300 per call.
	if s.BoxesA["io_wait_ns"] != 10 || s.BoxesA["cpu_ns"] != 90 || s.BoxesB["io_wait_ns"] != 300 || s.BoxesB["cpu_ns"] != 100 ||
		s.BoxesB["lock_ns"] != 0 || len(s.BoxesB) != len(model.Boxes) {
		t.Errorf("slower's box means: A %v, B %v", s.BoxesA, s.BoxesB)
	}
	if f := ds[0]; f.TotalChange() != -5000 || f.MeanRatio != 1 {
		t.Errorf("fewer: %+v", f)
	}
	if top, common := QueryDeltas(slices.Values(a), slices.Values(b), 1); len(top) != 1 || top[0].Fingerprint != "fewer" || common != 3 {
		t.Errorf("top 1: %+v (%d in both)", top, common)
	}
	// No fingerprint in common: an empty JSON list, and the text says so.
	c := Compare(nil, nil)
	c.Queries, c.Common = QueryDeltas(slices.Values(a[:1]), slices.Values(b[6:]), 10)
	js, _ := json.Marshal(c)
	if !strings.Contains(string(js), `"queries":[]`) || !strings.Contains(string(js), `"fingerprints_in_both":0`) {
		t.Errorf("JSON %s", js)
	}
	var out strings.Builder
	PrintComparison(&out, c)
	if !strings.Contains(out.String(), "no query fingerprint is in both recordings") {
		t.Errorf("text:\n%s", out.String())
	}
	c.Queries, c.Common = QueryDeltas(slices.Values(a), slices.Values(b), 10)
	out.Reset()
	PrintComparison(&out, c)
	for _, want := range []string{"3 query fingerprints in both recordings; the 3 whose total time changed most", "4.00x", "-5us", "+1us", "Q slower"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	// JSON names each box, as query records do.
	js, _ = json.Marshal(c)
	if !strings.Contains(string(js), `"mean_box_ns_b":{"aio_wait_ns":0,"cpu_ns":100,"io_wait_ns":300,`) {
		t.Errorf("JSON lacks slower's boxes by name: %s", js)
	}
}

func TestFormatChange(t *testing.T) {
	for ns, want := range map[int64]string{0: "0ns", 1500: "+1.5us", -2e6: "-2ms"} {
		if got := FormatChange(ns); got != want {
			t.Errorf("FormatChange(%d) = %q, want %q", ns, got, want)
		}
	}
}

// A step's figures: times per query, their change and a share, or, for
// the page cache's miss ratio, percentages and no change nor share. A
// share beyond the whole is said in words, never above 100%.
func TestStepFigures(t *testing.T) {
	for _, c := range []struct {
		s                   Step
		a, b, change, share string
	}{
		{Step{Layer: "waterfall", A: 1500, B: 2.5e6, Share: 0.854}, "1.5us", "2.5ms", "+2.5ms", "85%"},
		{Step{Layer: "waterfall", A: 2e6, B: 1e6, Share: -0.001}, "2ms", "1ms", "-1ms", "0%"},
		{Step{Layer: "waterfall", A: 1e6, B: 31e6, Share: 3.01}, "1ms", "31ms", "+30ms", "more than all"},
		{Step{Layer: "waterfall", A: 31e6, B: 1e6, Share: -3.01}, "31ms", "1ms", "-30ms", "against, more than all"},
		{Step{Layer: "block device", A: 1e6, B: 2e6, Share: 1.004}, "1ms", "2ms", "+1ms", "100%"},
		{Step{Layer: "page cache", A: 0.25, B: 0.9}, "25.0%", "90.0%", "", ""},
	} {
		if a, b, change, share := c.s.Figures(); a != c.a || b != c.b || change != c.change || share != c.share {
			t.Errorf("%+v: %q %q %q %q, want %q %q %q %q", c.s, a, b, change, share, c.a, c.b, c.change, c.share)
		}
	}
}
