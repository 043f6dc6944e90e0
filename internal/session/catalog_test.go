package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// The catalog (internal/model) and the kernel's enums (dbiolat.h) name
// the same counters, histograms and boxes: a value added on one side
// without the other fails here, before any output could miss it.
func TestCatalogMatchesTheKernel(t *testing.T) {
	stats, hists, boxes, err := probe.KernelNames()
	if err != nil {
		t.Fatal(err)
	}
	var counters, histograms, boxNames []string
	for _, c := range model.Counters {
		if c.Kernel {
			counters = append(counters, c.Name)
		}
	}
	for _, h := range model.Histograms {
		histograms = append(histograms, h.Name)
	}
	for _, b := range model.Boxes {
		if b.Kernel {
			boxNames = append(boxNames, strings.TrimSuffix(b.Name, "_ns"))
		}
	}
	for _, c := range []struct {
		what            string
		kernel, catalog []string
	}{
		{"drop counters (enum stat_id, model.Counters)", stats, counters},
		{"histograms (enum hist_id, model.Histograms)", hists, histograms},
		{"waterfall boxes (enum box, model.Boxes)", boxes, boxNames},
	} {
		k, m := slices.Sorted(slices.Values(c.kernel)), slices.Sorted(slices.Values(c.catalog))
		if !slices.Equal(k, m) {
			t.Errorf("%s differ:\nkernel  %v\ncatalog %v", c.what, k, m)
		}
	}
}
