package output

import (
	"maps"
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

// withRunq adds run-queue wait to a query's time: the backend was ready to
// run while other threads held the CPUs it may use.
func withRunq(q model.Query, ms float64) model.Query {
	q.RunqNs = uint64(ms * 1e6)
	q.QueryNs += q.RunqNs
	return q
}

// withEngineCPU sets the FUSE daemon's time on CPU serving a query's requests.
func withEngineCPU(q model.Query, ms float64) model.Query {
	q.EngineCPUNs = uint64(ms * 1e6)
	return q
}

// withBehind sets, of a query's run-queue wait, the waits behind the
// storage engine's threads (runq_engine_ns).
func withBehind(q model.Query, ms float64) model.Query {
	q.RunqEngineNs = uint64(ms * 1e6)
	return q
}

// withWaits sets how many run-queue waits a query's run-queue wait sums.
func withWaits(q model.Query, n uint64) model.Query {
	q.RunqWaits = n
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
		not  []string // not in it
		env  map[string]string
		// Both recordings measured runq_engine_ns; else they are older,
		// and the engine's CPU (engine_cpu_ns) is weighed instead.
		measured bool
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
		// The verdict that contradicted itself: the same scans on
		// the plain disk, then behind bindfs on fewer CPUs than busy threads.
		// The run-queue wait leads (+30.8ms, 40% of the change), and 28ms of
		// it per query ended when one of the engine's threads left the CPU
		// to the backend: its threads took the CPUs, and the verdict says so
		// first, before the I/O wait, which it follows down to the same
		// engine.
		name:     "engine-took-the-cpus",
		a:        times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:        times(3, withBehind(withEngineCPU(withFuse(withRunq(scan("s", 88.6, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 32.8), 1061, 40, 38), 35), 28)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want: []string{"1.93x slower", "; the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs) took the CPUs the backend needed: their run-queue wait +30.8ms per query, 40% of the change, +28ms of it behind the engine's threads, which served the queries with +35ms of CPU per query (other boxes: on CPU +28.6ms, I/O wait +16.8ms)",
			"; and I/O wait moved with it, +16.8ms per query", "arises in the userspace storage engine bindfs[17560]"},
		not: []string{"not in the I/O stack"},
	}, {
		// The end-to-end pair's failure with the engine's CPU alone: the
		// engine's CPU serving traced requests (+44.7ms) was less than half
		// of the run-queue wait's growth (+99.3ms), its own readahead and
		// the moments after each answer being no request's; behind its
		// threads, the backend waited +90ms more: the engine took them.
		name:     "engine-took-the-cpus-unrequested",
		a:        times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:        times(3, withBehind(withEngineCPU(withFuse(withRunq(scan("s", 90, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 101.3), 1061, 40, 38), 44.7), 90)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want:     []string{"took the CPUs the backend needed: their run-queue wait +99.3ms per query", "+90ms of it behind the engine's threads, which served the queries with +44.7ms of CPU per query"},
		not:      []string{"not in the I/O stack", "other threads"},
	}, {
		// Beside a CPU hog elsewhere (on the machine's other CPU), other
		// threads crowd the pinned one: A's scans already waited as long as
		// they ran. Through FUSE the backend, woken for each answer, waited
		// for the CPU four times as often, behind other threads for less
		// each time (88ms in 100 waits in A; 151.6ms in 400 in B). The new
		// contention is the engine's alone (+41.4ms): it took the CPUs,
		// though most of the run-queue wait's growth was behind others.
		name:     "engine-took-the-cpus-beside-a-hog-elsewhere",
		a:        times(3, withWaits(withRunq(scan("s", 86.3, 10, 8, 54, 22000, 2, 0.1, 1.9), 88), 100)),
		b:        times(3, withWaits(withBehind(withEngineCPU(withFuse(withRunq(scan("s", 183.5, 15.5, 12, 2225, 13000, 2.5, 0.1, 2.3), 193), 1061, 40, 38), 48), 41.4), 400)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want:     []string{"took the CPUs the backend needed: their run-queue wait +105ms per query, 51% of the change, +41.4ms of it behind the engine's threads, which served the queries with +48ms of CPU per query, the rest behind other threads no longer a wait than in A, in 400 waits per query instead of 100"},
		not:      []string{"not in the I/O stack", "other threads took"},
	}, {
		// Both took more: of the run-queue wait's growth (+130ms), +50ms was
		// behind the engine, and +40ms behind other threads beyond A's
		// 0.2ms per wait in B's 300 waits. The engine's is the larger part
		// of the new contention: it took the CPUs, and the others' part is
		// said.
		name:     "engine-took-more-than-others",
		a:        times(3, withWaits(withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 20), 100)),
		b:        times(3, withWaits(withBehind(withFuse(withRunq(scan("s", 70, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 150), 1061, 40, 38), 50), 300)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want:     []string{"took the CPUs the backend needed: their run-queue wait +130ms per query, 83% of the change, +50ms of it behind the engine's threads, +40ms behind other threads beyond A's wait behind them per wait"},
		not:      []string{"not in the I/O stack", "other threads took"},
	}, {
		// The engine test's pair with nothing else on the CPU (both sides
		// pinned in the real-time class): the backend's own time on CPU
		// leads, +104ms, spent reading through FUSE (in the kernel's FUSE
		// client, inside its read calls); its run-queue wait, +44.2ms, is
		// nearly all behind the engine. On CPU is followed down the I/O
		// stack to the engine, which also took the CPUs.
		name:     "engine-cpu-in-file-calls",
		a:        times(3, withWaits(withRunq(scan("s", 79.7, 10.8, 12.4, 106, 49102, 2, 0.1, 1.9), 0.025), 1)),
		b:        times(3, withWaits(withBehind(withEngineCPU(withFuse(withRunq(scan("s", 184, 33.7, 190, 949, 48259, 2.5, 0.1, 2.3), 44.2), 949, 1310, 70.3), 68.1), 43.6), 170)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want: []string{"on CPU +104ms per query, 61% of the change, inside file system calls (their time less the I/O and run-queue waits +109ms per query), in file system reads that missed the page cache",
			"the difference arises in the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs); the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs) also took the CPUs the backend needed: their run-queue wait +44.2ms per query, +43.6ms of it behind the engine's threads"},
		not: []string{"not in the I/O stack", "other threads"},
	}, {
		// Traced without --fs: the engine's CPU is not measured, the waits
		// behind its threads are, and decide alone.
		name:     "engine-took-the-cpus-without-fs",
		a:        times(3, withRunq(scan("s", 60, 20, 0, 0, 0, 2, 0.1, 1.9), 2)),
		b:        times(3, withBehind(withFuse(withRunq(scan("s", 88.6, 36.8, 0, 0, 0, 2.5, 0.1, 2.3), 32.8), 1061, 40, 0), 28)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want:     []string{"took the CPUs the backend needed: their run-queue wait +30.8ms per query, 40% of the change, +28ms of it behind the engine's threads (other boxes"},
		not:      []string{"not in the I/O stack", "of CPU per query"},
	}, {
		// Both: behind bindfs and beside a CPU hog. The engine's CPU serving
		// the scans grew by +40ms, more than half of the run-queue wait's
		// +60ms, but only +10ms of that wait was behind its threads, and
		// each wait behind other threads grew (2ms in 100 waits in A, 52ms
		// in 150 in B): the hog took the CPUs. The engine is named, not as the cause, and the
		// I/O wait is still followed down to it.
		name:     "engine-and-cpu-hog",
		a:        times(3, withWaits(withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2), 100)),
		b:        times(3, withWaits(withBehind(withEngineCPU(withFuse(withRunq(scan("s", 62, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 62), 1061, 40, 38), 40), 10), 150)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want: []string{"run-queue wait +60ms per query", "not in the I/O stack, nor the storage engine's (of the run-queue wait's growth, +10ms per query was behind the threads of bindfs[17560] serving /mnt (fuse.bindfs), and +49ms behind other threads beyond A's wait behind them per wait): other threads took the CPUs; but I/O wait moved with it, +16.8ms per query",
			"arises in the userspace storage engine bindfs[17560]"},
		not: []string{"took the CPUs the backend needed"},
	}, {
		// An I/O wait leads, followed down to the engine; the run-queue wait
		// grew beside it, most of it behind the engine: said after it.
		name:     "engine-io-leads",
		a:        times(3, withRunq(scan("s", 200, 3, 2.5, 54, 22000, 2, 0.1, 1.9), 107)),
		b:        times(3, withBehind(withFuse(withRunq(scan("s", 116, 137, 130, 1030, 15000, 2.5, 0.1, 2.3), 176), 1061, 394, 124), 60)),
		env:      map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		measured: true,
		want:     []string{"; I/O wait +134ms per query", "the difference arises in the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs); the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs) also took the CPUs the backend needed: their run-queue wait +69ms per query, +60ms of it behind the engine's threads"},
		not:      []string{"not in the I/O stack"},
	}, {
		// A CPU hog on the plain disk, recorded by this dbiolat: no engine,
		// nothing behind one; said as before.
		name:     "cpu-hog-measured",
		a:        times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:        times(3, withRunq(scan("s", 63, 21, 19, 54, 22000, 2, 0.1, 1.9), 47)),
		measured: true,
		want:     []string{"run-queue wait +45ms per query, 92% of the change: the time is not in the I/O stack"},
		not:      []string{"engine", "took the CPUs"},
	}, {
		// Recordings made before runq_engine_ns was measured: the engine's
		// CPU serving the queries is weighed instead, with the same half.
		name: "old-engine-took-the-cpus",
		a:    times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:    times(3, withEngineCPU(withFuse(withRunq(scan("s", 88.6, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 32.8), 1061, 40, 38), 35)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"1.93x slower", "; the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs) took the CPUs the backend needed: its CPU serving the queries +35ms per query, their run-queue wait +30.8ms per query, 40% of the change (other boxes: on CPU +28.6ms, I/O wait +16.8ms)",
			"; and I/O wait moved with it, +16.8ms per query", "arises in the userspace storage engine bindfs[17560]"},
		not: []string{"not in the I/O stack"},
	}, {
		// An I/O wait leads, followed down to the engine; the run-queue wait
		// grew beside it, by less than the engine's CPU: said after it.
		name: "old-engine-io-leads",
		a:    times(3, withRunq(scan("s", 200, 3, 2.5, 54, 22000, 2, 0.1, 1.9), 107)),
		b:    times(3, withEngineCPU(withFuse(withRunq(scan("s", 116, 137, 130, 1030, 15000, 2.5, 0.1, 2.3), 176), 1061, 394, 124), 101)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"; I/O wait +134ms per query", "the difference arises in the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs); the userspace storage engine bindfs[17560] serving /mnt (fuse.bindfs) also took the CPUs the backend needed: its CPU serving the queries +101ms per query, their run-queue wait +69ms per query"},
		not:  []string{"not in the I/O stack"},
	}, {
		// On CPU leads, but the run-queue wait grew nearly as much, and the
		// engine's CPU covers it: the shortage is the engine's, said first.
		name: "old-engine-cpu-leads",
		a:    times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:    times(3, withEngineCPU(withFuse(withRunq(scan("s", 90, 20, 18, 2225, 13000, 2.5, 0.1, 2.3), 27), 1061, 15, 14), 30)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"took the CPUs the backend needed: its CPU serving the queries +30ms per query, their run-queue wait +25ms per query", "other boxes: on CPU +30ms"},
		not:  []string{"not in the I/O stack"},
	}, {
		// A CPU hog beside the database on the plain disk: the run-queue
		// wait leads as above, but no engine serves the queries: said as
		// before, not in the I/O stack, and no engine is blamed.
		name: "cpu-hog",
		a:    times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:    times(3, withRunq(scan("s", 63, 21, 19, 54, 22000, 2, 0.1, 1.9), 47)),
		want: []string{"run-queue wait +45ms per query, 92% of the change: the time is not in the I/O stack"},
		not:  []string{"engine", "took the CPUs"},
	}, {
		// Both: behind bindfs and beside a CPU hog. The engine's CPU serving
		// the scans (+10ms) is less than half of the run-queue wait's growth
		// (+60ms): other threads took the CPUs; the engine is named, but
		// not as the cause, and the I/O wait is still followed down to it.
		name: "old-engine-and-cpu-hog",
		a:    times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:    times(3, withEngineCPU(withFuse(withRunq(scan("s", 62, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 62), 1061, 40, 38), 10)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"run-queue wait +60ms per query", "not in the I/O stack, nor the storage engine's CPU (bindfs[17560] serving /mnt (fuse.bindfs) served the queries with +10ms of CPU per query, less than half of the run-queue wait's growth): other threads took the CPUs; but I/O wait moved with it, +16.8ms per query",
			"arises in the userspace storage engine bindfs[17560]"},
		not: []string{"took the CPUs the backend needed"},
	}, {
		// Traced without --fs, the engine's CPU is not measured: it is
		// weighed neither way, and the verdict reads as before.
		name: "old-engine-cpu-unmeasured",
		a:    times(3, withRunq(scan("s", 60, 20, 18, 54, 22000, 2, 0.1, 1.9), 2)),
		b:    times(3, withFuse(withRunq(scan("s", 62, 36.8, 34, 2225, 13000, 2.5, 0.1, 2.3), 62), 1061, 40, 38)),
		env:  map[string]string{"engine": "bindfs[17560] serving /mnt (fuse.bindfs)"},
		want: []string{"run-queue wait +60ms per query", ": not in the I/O stack; but I/O wait moved with it"},
		not:  []string{"took the CPUs", "nor the storage engine's CPU"},
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
			envA, envB := map[string]string{}, map[string]string{}
			maps.Copy(envB, c.env)
			if c.measured {
				envA[model.RunqEngineMeta] = "measured"
				envB[model.RunqEngineMeta] = "measured"
			}
			steps, verdict := Chain(slices.Values(c.a), slices.Values(c.b), envA, envB)
			t.Logf("verdict: %s", verdict)
			for _, w := range c.want {
				if !strings.Contains(verdict, w) {
					t.Errorf("verdict %q lacks %q", verdict, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(verdict, w) {
					t.Errorf("verdict %q says %q", verdict, w)
				}
			}
			for i, s := range steps {
				if slices.ContainsFunc(steps[:i], func(o Step) bool { return o.Name == s.Name }) {
					t.Errorf("step %s twice", s.Name)
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
