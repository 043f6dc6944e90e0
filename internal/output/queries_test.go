package output

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
)

func q(fp string, ns, iowait uint64) model.Query {
	return model.Query{Fingerprint: fp, Query: "Q " + fp, QueryNs: ns, IOWaitNs: iowait, CPUNs: ns - iowait}
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
}

func TestFormatChange(t *testing.T) {
	for ns, want := range map[int64]string{0: "0ns", 1500: "+1.5us", -2e6: "-2ms"} {
		if got := FormatChange(ns); got != want {
			t.Errorf("FormatChange(%d) = %q, want %q", ns, got, want)
		}
	}
}
