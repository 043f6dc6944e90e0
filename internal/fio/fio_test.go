package fio

import (
	"os"
	"testing"
)

// A real fio 3.33 output (randread, 8 KiB, libaio, QD1, on this project's
// CI machine): the figures are fio's, copied, not recomputed.
func TestParseKeepsFiosFigures(t *testing.T) {
	out, err := os.ReadFile("testdata/randread-libaio.json")
	if err != nil {
		t.Fatal(err)
	}
	j, err := Parse(Reference[1], out)
	if err != nil {
		t.Fatal(err)
	}
	r := j.Read
	if r.Ops != 26077 || r.Bytes != 213622784 || r.IOPS != 13031.984008 || r.BWBytes != 106758012 ||
		r.ClatMeanNs != 55549.026498 || r.ClatP50Ns != 53504 || r.LatMeanNs != 76218.778656 || j.Seconds != 2 {
		t.Errorf("parsed %+v in %.3fs", r, j.Seconds)
	}
	if j.Write.Ops != 0 || string(j.FioOutput) != string(out) {
		t.Errorf("write side %+v, or the output was not kept", j.Write)
	}
}

func TestParseRejectsWhatIsNotARun(t *testing.T) {
	for _, in := range []string{"", "{", `{"jobs":[]}`, `{"jobs":[{"jobname":"x","error":5}]}`, `{"jobs":[{"jobname":"x"}]}`} {
		if _, err := Parse(Reference[0], []byte(in)); err == nil {
			t.Errorf("Parse(%q) gave no error", in)
		}
	}
}
