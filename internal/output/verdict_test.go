package output

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dbiolat/dbiolat/internal/model"
)

// scan is a cold full scan of the shape the issue measured: its time split
// into CPU, I/O wait and the file system and block time under it.
func scan(fp string, cpu, ioWait, missNs, misses, hits, blkBusy, blkQueue, blkDevice float64) model.Query {
	q := model.Query{Statements: 1, Fingerprint: fp, CPUNs: uint64(cpu * 1e6), IOWaitNs: uint64(ioWait * 1e6),
		BlkNs: uint64(blkBusy * 1e6), BlkQueueNs: uint64(blkQueue * 1e6), BlkDeviceNs: uint64(blkDevice * 1e6)}
	q.FSReadMissCount, q.FSReadHitCount = uint64(misses), uint64(hits)
	q.FSReadCount = q.FSReadMissCount + q.FSReadHitCount
	q.FSReadMissNs, q.FSReadHitNs = uint64(missNs*1e6), uint64(hits*2000)
	q.FSReadNs = q.FSReadMissNs + q.FSReadHitNs
	q.QueryNs = q.CPUNs + q.IOWaitNs
	return q
}

// withFuse adds the requests a query sent to a FUSE daemon.
func withFuse(q model.Query, requests int, ms, engineMs float64) model.Query {
	q.FuseCount, q.FuseNs, q.EngineNs = uint64(requests), uint64(ms*1e6), uint64(engineMs*1e6)
	return q
}

// withLWLock adds sleeps on LWLocks to a query's time.
func withLWLock(q model.Query, ms float64) model.Query {
	q.LWLockNs = uint64(ms * 1e6)
	q.QueryNs += q.LWLockNs
	return q
}

func times(n int, q model.Query) []model.Query {
	out := make([]model.Query, n)
	for i := range out {
		out[i] = q
	}
	return out
}

func step(steps []Step, name string) *Step {
	for i := range steps {
		if steps[i].Name == name {
			return &steps[i]
		}
	}
	return nil
}

func TestChainFollowsTheQueriesDown(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []model.Query
		want []string // in the verdict
		env  map[string]string
	}{{
		// The FUSE pair: reads slower, the backend's block reads
		// fewer (the daemon issues them): above the block device.
		name: "fuse",
		a:    times(3, scan("s", 65.9, 2.6, 2.5, 54, 22000, 2, 0.1, 1.9)),
		b:    times(3, scan("s", 88.2, 60.8, 58, 2225, 13000, 0.9, 0.05, 0.8)),
		want: []string{"2.18x slower", "I/O wait +58.2ms per query, 72% of the change", "reads that missed the page cache", "above the block device"},
	}, {
		// The same, traced with the engine: its requests hold the time.
		name: "engine",
		a:    times(3, scan("s", 65.9, 2.6, 2.5, 54, 22000, 2, 0.1, 1.9)),
		b:    times(3, withFuse(scan("s", 88.2, 60.8, 58, 2225, 13000, 2.5, 0.1, 2.3), 1061, 62, 40)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"whose FUSE requests took +62ms per query", "arises in the userspace storage engine bindfs[17560] serving /mnt", "per missed read"},
	}, {
		name: "device",
		a:    times(5, scan("s", 20, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(5, scan("s", 20, 50, 49, 100, 900, 48, 2, 46)),
		env:  map[string]string{"device": "/dev/loop3", "backing_file": "/srv/disk.img"},
		want: []string{"I/O wait +40ms", "arises at the block device /dev/loop3 (a loop device over /srv/disk.img), in the device"},
	}, {
		name: "queue",
		a:    times(5, scan("s", 20, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(5, scan("s", 20, 50, 49, 100, 900, 48, 39, 9)),
		want: []string{"in the block queue"},
	}, {
		name: "cpu",
		a:    times(4, scan("s", 20, 5, 4, 10, 90, 4, 0.5, 3.5)),
		b:    times(4, scan("s", 60, 5, 4, 10, 90, 4, 0.5, 3.5)),
		want: []string{"2.60x slower", "on CPU +40ms per query, 100% of the change", "not in the I/O stack"},
	}, {
		// I/O wait grew by more than the query did: CPU fell. Said so, and
		// the fall is a step of its own.
		name: "shrinking",
		a:    times(4, scan("s", 40, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(4, scan("s", 20, 60, 59, 100, 900, 58, 2, 56)),
		want: []string{"I/O wait +50ms per query, more than the whole of the change (other boxes: on CPU -20ms), in file system reads", "arises at the block device"},
	}, {
		// As long in all, but the time moved from CPU to I/O wait (the
		// copying done by a storage engine, now waited for): followed.
		name: "shifted",
		a:    times(4, scan("s", 60, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(4, scan("s", 20, 50, 49, 100, 900, 48, 2, 46)),
		want: []string{"about as long in both", "but their time moved", "I/O wait +40ms per query", "on CPU", "arises at the block device"},
	}, {
		// Faster by CPU, while the I/O wait grew against it: both said.
		name: "against",
		a:    times(4, scan("s", 80, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(4, scan("s", 20, 40, 39, 100, 900, 38, 2, 36)),
		want: []string{"faster", "on CPU -60ms", "but I/O wait moved the other way, +30ms per query", "arises at the block device"},
	}, {
		// Commits on a throttled disk: the waits for the one in the fsync,
		// on WAL's LWLock, lead; the I/O wait grew with them, by a tenth of
		// the queries' time or more: followed too, down to the file system.
		name: "beside",
		a:    times(4, scan("s", 20, 10, 9.5, 100, 900, 9, 1, 8)),
		b:    times(4, withLWLock(scan("s", 20, 20, 19.5, 100, 900, 9, 1, 8), 30)),
		want: []string{"LWLock wait +30ms per query", "but I/O wait moved with it, +10ms per query", "above the block device"},
	}, {
		name: "alike",
		a:    times(4, scan("s", 20, 5, 4, 10, 90, 4, 0.5, 3.5)),
		b:    times(4, scan("s", 21, 5, 4, 10, 90, 4, 0.5, 3.5)),
		want: []string{"about as long"},
	}, {
		// I/O wait grew, but not in file system calls: said unexplained.
		name: "unexplained",
		a:    times(2, scan("s", 20, 5, 4, 10, 90, 4, 0.5, 3.5)),
		b:    times(2, scan("s", 20, 45, 4, 10, 90, 4, 0.5, 3.5)),
		want: []string{"I/O wait +40ms", "unexplained"},
	}, {
		// Only the mix changed: B ran more of the slow fingerprint. Weighted
		// by B's calls, no query is slower.
		name: "mix",
		a:    append(times(9, scan("fast", 1, 0, 0, 1, 9, 0, 0, 0)), times(1, scan("slow", 50, 50, 49, 100, 900, 48, 2, 46))...),
		b:    append(times(1, scan("fast", 1, 0, 0, 1, 9, 0, 0, 0)), times(9, scan("slow", 50, 50, 49, 100, 900, 48, 2, 46))...),
		want: []string{"about as long"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			steps, verdict := Chain(slices.Values(c.a), slices.Values(c.b), nil, c.env)
			for _, w := range c.want {
				if !strings.Contains(verdict, w) {
					t.Errorf("verdict %q lacks %q", verdict, w)
				}
			}
			if strings.Contains(verdict, "unexplained") != (c.name == "unexplained") {
				t.Errorf("verdict %q", verdict)
			}
			q := step(steps, "query_ns")
			if q == nil || q.Share != 1 && q.A != q.B {
				t.Fatalf("the chain starts elsewhere than the query's time: %+v", steps)
			}
			// The boxes add up to the query's time, so the steps' shares add
			// up to the whole change, but for the boxes left out for moving
			// less than minShare each.
			var sum float64
			for _, s := range steps {
				if s.Layer == "waterfall" {
					sum += s.Share
				}
			}
			if !strings.Contains(verdict, "about as long") && math.Abs(sum-1) > float64(len(model.Boxes))*minShare {
				t.Errorf("the boxes hold %.2f of the change", sum)
			}
		})
	}
}

// Without --fs, the chain goes from the I/O wait to the block device.
func TestChainWithoutFileSystemCalls(t *testing.T) {
	a, b := scan("s", 20, 10, 0, 0, 0, 9, 1, 8), scan("s", 20, 50, 0, 0, 0, 2, 0.5, 1.5)
	steps, verdict := Chain(slices.Values([]model.Query{a}), slices.Values([]model.Query{b}), nil, nil)
	if !strings.Contains(verdict, "above the block device") || step(steps, "fs_read_miss_ratio") != nil {
		t.Errorf("verdict %q, steps %+v", verdict, steps)
	}
}

// No fingerprint in both: no chain, the caller keeps the histograms' verdict.
func TestChainNeedsCommonQueries(t *testing.T) {
	steps, verdict := Chain(slices.Values([]model.Query{scan("x", 1, 1, 1, 1, 1, 1, 1, 1)}), slices.Values([]model.Query{scan("y", 1, 1, 1, 1, 1, 1, 1, 1)}), nil, nil)
	if steps != nil || verdict != "" {
		t.Errorf("%v %q", steps, verdict)
	}
}

// The verdict's sentence and the chain's table say a part beyond the
// whole alike: never a percentage above 100%.
func TestShareOfNeverAboveTheWhole(t *testing.T) {
	for _, c := range []struct {
		part, whole float64
		want        string
	}{
		{72, 100, "72% of the change"}, {100.4, 100, "100% of the change"}, {102, 100, "more than the whole of the change"},
		{301, 100, "more than the whole of the change"}, {-20, 100, "while the whole moved the other way"},
		{100, 1, "while the whole hardly moved"},
	} {
		if got := shareOf(c.part, c.whole, "the change"); got != c.want {
			t.Errorf("shareOf(%v, %v) = %q, want %q", c.part, c.whole, got, c.want)
		}
		if table := ShareText(c.part / c.whole); c.part > 0 && c.whole > 1 && strings.Contains(table, "more than") != strings.Contains(c.want, "more than") {
			t.Errorf("shareOf(%v, %v) = %q, but the table says %q", c.part, c.whole, c.want, table)
		}
	}
}
