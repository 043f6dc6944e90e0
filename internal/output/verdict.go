package output

import (
	"cmp"
	"fmt"
	"io"
	"iter"
	"math"
	"strings"

	"github.com/dbiolat/dbiolat/internal/model"
)

// A comparison's verdict follows the queries' time down the stack: which
// box of the waterfall grew, then, for I/O waits, which I/O layer explains
// it. Each step is one quantity per query in A and B, with its share of
// the queries' change, so that a reader can check the conclusion line by
// line; a change no layer explains is called unexplained.

// Step is one link of a verdict's chain.
type Step struct {
	Name  string  `json:"name"`  // the quantity: a query field ("io_wait_ns", "fs_read_miss_ns"), or "fs_read_miss_ratio"
	Layer string  `json:"layer"` // "query", "waterfall", "file system", "page cache", "block device"
	What  string  `json:"what"`  // in words
	A     float64 `json:"a"`     // per query: A's, in B's mix of fingerprints
	B     float64 `json:"b"`
	Ratio float64 `json:"ratio"` // B / A; 0 when A is 0
	// Share of the change the chain follows ((B − A) / its B − A): the
	// queries' change, or when they took about as long, the change of the
	// box that moved most (the query step's note says so); 0 for the page
	// cache's miss ratio. Above 1 when the step moved by more than the
	// whole, others having moved the other way (ShareText says it so).
	Share float64 `json:"share"`
	Note  string  `json:"note,omitempty"` // what this step concludes
}

// quantity is what a step compares: a field of a query, per query.
type quantity struct {
	name, layer, what string
	of                func(*model.Query) uint64
}

// boxes are the waterfall's boxes as quantities.
func boxes() []quantity {
	var qs []quantity
	for _, b := range model.Boxes {
		qs = append(qs, quantity{b.Name, "waterfall", b.Title, func(q *model.Query) uint64 { return *b.Of(q) }})
	}
	return qs
}

var (
	queryTime = quantity{"query_ns", "query", "query time", func(q *model.Query) uint64 { return q.QueryNs }}
	// The I/O layers under an I/O wait, top down.
	fsOps = []quantity{
		{"fs_read_miss_ns", "file system", "reads that missed the page cache", func(q *model.Query) uint64 { return q.FSReadMissNs }},
		{"fs_read_hit_ns", "file system", "reads served by the page cache", func(q *model.Query) uint64 { return q.FSReadHitNs }},
		{"fs_write_ns", "file system", "writes", func(q *model.Query) uint64 { return q.FSWriteNs }},
		{"fs_sync_ns", "file system", "syncs", func(q *model.Query) uint64 { return q.FSSyncNs }},
	}
	// A userspace storage engine (FUSE) between the file system and the disk.
	fuseReqs  = quantity{"fuse_ns", "engine", "FUSE requests, send to answer (summed)", func(q *model.Query) uint64 { return q.FuseNs }}
	engineNs  = quantity{"engine_ns", "engine", "the engine serving them", func(q *model.Query) uint64 { return q.EngineNs }}
	engineCPU = quantity{"engine_cpu_ns", "engine", "the engine on CPU serving them", func(q *model.Query) uint64 { return q.EngineCPUNs }}
	// Of the run-queue wait, the waits behind the engine's threads.
	runqEngine = quantity{"runq_engine_ns", "engine", "run-queue wait behind the engine's threads", func(q *model.Query) uint64 { return q.RunqEngineNs }}
	runqWaits  = quantity{"runq_waits", "waterfall", "run-queue waits (count; weighed, not a step)", func(q *model.Query) uint64 { return q.RunqWaits }}
	blkBusy    = quantity{"blk_ns", "block device", "block requests in flight (wall time)", func(q *model.Query) uint64 { return q.BlkNs }}
	blkQueue   = quantity{"blk_queue_ns", "block device", "in the block queue (summed over requests)", func(q *model.Query) uint64 { return q.BlkQueueNs }}
	blkDevice  = quantity{"blk_device_ns", "block device", "in the device (summed over requests)", func(q *model.Query) uint64 { return q.BlkDeviceNs }}
	// Counts, for the page cache's miss ratio and the time per read.
	fsReads  = quantity{"fs_read_count", "page cache", "reads", func(q *model.Query) uint64 { return q.FSReadCount }}
	fsMisses = quantity{"fs_read_miss_count", "page cache", "reads that missed", func(q *model.Query) uint64 { return q.FSReadMissCount }}
)

// Thresholds of the chain. A quantity that moved less than alike in
// ratio did not change; a layer explains the one above when it moved the
// same way by at least explainsHalf of its change (the rest: CPU in the
// calls, overlap of parallel requests); a step is shown from minShare of
// the queries' change.
const (
	alike        = 0.10
	explainsHalf = 0.5
	minShare     = 0.05
)

// means holds, per query, the quantities of the fingerprints found in
// both recordings: B's own, and A's per-fingerprint means weighted by B's
// calls, so that a different mix of queries is not taken for a change.
type means struct {
	calls uint64 // B's queries of the common fingerprints
	fps   int
	a, b  map[string]float64
}

func (m *means) get(q quantity) (a, b float64) { return m.a[q.name], m.b[q.name] }

func mixMeans(qa, qb iter.Seq[model.Query], qs []quantity) *means {
	type sums struct {
		calls uint64
		v     []float64
	}
	sum := func(seq iter.Seq[model.Query]) map[string]*sums {
		out := map[string]*sums{}
		for q := range seq {
			s := out[q.Fingerprint]
			if s == nil {
				s = &sums{v: make([]float64, len(qs))}
				out[q.Fingerprint] = s
			}
			s.calls += uint64(q.Statements)
			for i, x := range qs {
				s.v[i] += float64(x.of(&q))
			}
		}
		return out
	}
	sa, sb := sum(qa), sum(qb)
	m := &means{a: map[string]float64{}, b: map[string]float64{}}
	for fp, y := range sb {
		x, ok := sa[fp]
		if !ok || x.calls == 0 || y.calls == 0 { // only parts of statements (suspended portals)
			continue
		}
		m.fps++
		m.calls += y.calls
		w := float64(y.calls) / float64(x.calls)
		for i, q := range qs {
			m.a[q.name] += w * x.v[i]
			m.b[q.name] += y.v[i]
		}
	}
	if m.calls == 0 {
		return m
	}
	n := float64(m.calls)
	for k := range m.a {
		m.a[k] /= n
		m.b[k] /= n
	}
	return m
}

// Chain follows the queries of two recordings down the stack and returns
// its steps and the verdict. envA and envB are the recordings'
// environments (record.Environment): the device, the file behind a loop
// device, the storage engine, named where they explain the change.
func Chain(qa, qb iter.Seq[model.Query], envA, envB map[string]string) ([]Step, string) {
	boxes := boxes()
	qs := append([]quantity{queryTime, fuseReqs, engineNs, engineCPU, runqEngine, runqWaits, blkBusy, blkQueue, blkDevice, fsReads, fsMisses}, boxes...)
	qs = append(qs, fsOps...)
	m := mixMeans(qa, qb, qs)
	if m.calls == 0 {
		return nil, ""
	}
	c := chain{m: m}
	a, b := m.get(queryTime)
	c.delta = b - a
	top := c.step(queryTime, fmt.Sprintf("%d fingerprints in both; %d queries in B", m.fps, m.calls))
	var head string
	if math.Abs(top.Ratio-1) < alike {
		// About as long in all; yet time may have moved from one box to
		// another (a storage engine doing the copying the backend did, now
		// waited for). The box that grew most (else the one that shrank
		// most), if by a tenth of the queries' time, is followed: shares
		// are then of its change.
		head = fmt.Sprintf("the queries took about as long in both (mean %s → %s, %.2fx, within %.0f%%)", dur(uint64(a)), dur(uint64(b)), top.Ratio, 100*alike)
		var grew, shrank float64
		for _, q := range boxes {
			x, y := m.get(q)
			grew, shrank = max(grew, y-x), min(shrank, y-x)
		}
		most := grew
		if grew < alike*a {
			most = shrank
		}
		if math.Abs(most) < alike*a {
			return c.steps, head + ": no layer to blame"
		}
		c.delta = most
		top.Share = (b - a) / c.delta
		top.Note += "; shares are of the box that moved most"
		head += ", but their time moved between the boxes of the waterfall"
	} else {
		way := "slower"
		if c.delta < 0 {
			way = "faster"
		}
		head = fmt.Sprintf("the queries were %.2fx %s (mean %s → %s)", top.Ratio, way, dur(uint64(a)), dur(uint64(b)))
	}

	// The waterfall: every box that moved, either way; the one that moved
	// most with the change leads.
	var lead *quantity
	var leadD float64
	for _, q := range boxes {
		x, y := m.get(q)
		d := y - x
		if math.Abs(d/c.delta) < minShare {
			continue
		}
		c.step(q, "")
		if d*c.delta > 0 && (lead == nil || d/c.delta > leadD/c.delta) {
			lead, leadD = &q, d
		}
	}
	if lead == nil || lead.name == "unaccounted_ns" {
		return c.steps, head + fmt.Sprintf("; no measured box of the waterfall moved with it: unexplained (%s)", c.boxList(""))
	}
	engine := cmp.Or(envB["engine"], envA["engine"])
	measured := envA[model.RunqEngineMeta] != "" && envB[model.RunqEngineMeta] != ""
	inCalls, awake := c.cpuInFileCalls(*lead, leadD)
	took, tk := c.cpusTaken(*lead, engine, measured, inCalls)
	if took == engineTook && !isIOWait(*lead) && !inCalls {
		// The engine is the cause: said first, with the run-queue wait it
		// explains; the boxes beside it (the lead among them when that is
		// on CPU) follow.
		head += fmt.Sprintf("; the userspace storage engine %s took the CPUs the backend needed: %s (other boxes: %s)",
			engineName(engine), tk.figures(shareOf(tk.runqD, b-a, "the change")), c.boxList("runq_ns"))
	} else {
		head += fmt.Sprintf("; %s %s per query, %s", c.what(*lead), FormatChange(int64(leadD)), shareOf(leadD, b-a, "the change"))
		if r := leadD / c.delta; r < explainsHalf || r > 1+minShare || c.delta != b-a { // not most of it, or others moved against it: say where the rest is
			head += " (other boxes: " + c.boxList(lead.name) + ")"
		}
	}
	if isIOWait(*lead) || inCalls {
		if inCalls {
			head += fmt.Sprintf(", inside file system calls (their time less the I/O and run-queue waits %s per query)", FormatChange(int64(awake)))
		}
		v := head + c.io(*lead, leadD, envA, envB)
		if took == engineTook { // the run-queue wait beside it is the engine's too
			v += fmt.Sprintf("; the userspace storage engine %s also took the CPUs the backend needed: %s", engineName(engine), tk.figures(""))
		}
		return c.steps, v
	}
	// What the CPU side's change is not, when not the engine's.
	notIO := ": not in the I/O stack"
	if took == othersTook && tk.measured {
		notIO = fmt.Sprintf(": not in the I/O stack, nor the storage engine's (of the run-queue wait's growth, %s per query was behind the threads of %s, and %s behind other threads beyond A's wait behind them per wait): other threads took the CPUs",
			FormatChange(int64(tk.behindD)), engineName(engine), FormatChange(int64(tk.othersD)))
	} else if took == othersTook {
		notIO = fmt.Sprintf(": not in the I/O stack, nor the storage engine's CPU (%s served the queries with %s of CPU per query, less than half of the run-queue wait's growth): other threads took the CPUs",
			engineName(engine), FormatChange(int64(tk.engineD)))
	}
	// The lead is not I/O; but an I/O wait may have moved by a tenth of
	// the queries' time too, followed then: the other way (a storage engine
	// taking over the copying the backend did on CPU, then waited for), or
	// with it (commits on a throttled disk: one backend waits in the fsync,
	// the others for it, on WAL's LWLock and the rows it holds).
	for _, q := range boxes {
		if x, y := m.get(q); isIOWait(q) && math.Abs(y-x) >= alike*a {
			way := "with it"
			if (y-x)*c.delta < 0 {
				way = "the other way"
			}
			if took == engineTook {
				return c.steps, head + fmt.Sprintf("; and %s moved %s, %s per query", c.what(q), way, FormatChange(int64(y-x))) + c.io(q, y-x, envA, envB)
			}
			return c.steps, head + fmt.Sprintf("%s; but %s moved %s, %s per query", notIO, c.what(q), way, FormatChange(int64(y-x))) +
				c.io(q, y-x, envA, envB)
		}
	}
	switch took {
	case engineTook:
		return c.steps, head
	case othersTook:
		return c.steps, head + notIO
	}
	return c.steps, head + ": the time is not in the I/O stack"
}

// engineName names a storage engine as record.Environment does, or
// generically when the recording does not.
func engineName(env string) string { return cmp.Or(env, "the FUSE daemon") }

func isIOWait(q quantity) bool { return q.name == "io_wait_ns" || q.name == "aio_wait_ns" }

// shareOf says which part of whole part is: "72% of the change". A part
// beyond the whole (a box that grew by more than the queries did, others
// having shrunk) is said so, not as a share above 100%.
func shareOf(part, whole float64, of string) string {
	if math.Abs(whole) < math.Abs(part)*minShare {
		return "while the whole hardly moved"
	}
	if part/whole < 0 {
		return "while the whole moved the other way"
	}
	if math.Round(100*part/whole) > 100 { // as the chain's table says it (ShareText)
		return "more than the whole of " + of
	}
	return fmt.Sprintf("%.0f%% of %s", 100*part/whole, of)
}

type chain struct {
	m     *means
	delta float64 // the change followed, per query: the queries', or the box's that moved most
	steps []Step
}

func (c *chain) what(q quantity) string {
	if q.layer == "waterfall" {
		return q.what
	}
	return q.layer + " " + q.what
}

func (c *chain) step(q quantity, note string) *Step {
	for i := range c.steps { // once each: the engine's CPU may be weighed for the CPU side, then under the I/O wait
		if c.steps[i].Name == q.name {
			return &c.steps[i]
		}
	}
	a, b := c.m.get(q)
	s := Step{Name: q.name, Layer: q.layer, What: q.what, A: a, B: b, Note: note}
	if a > 0 {
		s.Ratio = b / a
	}
	if c.delta != 0 {
		s.Share = (b - a) / c.delta
	}
	c.steps = append(c.steps, s)
	return &c.steps[len(c.steps)-1]
}

// boxList lists the boxes that moved, but one, with their change per
// query (a share of a small change would read as -468%).
func (c *chain) boxList(but string) string {
	var parts []string
	for _, s := range c.steps {
		if s.Layer == "waterfall" && s.Name != but {
			parts = append(parts, fmt.Sprintf("%s %s", s.What, FormatChange(int64(s.B-s.A))))
		}
	}
	if len(parts) == 0 {
		return "no box moved with it"
	}
	return strings.Join(parts, ", ")
}

// io follows an I/O wait down: the file system operation that explains
// it, the page cache, then the block device under it.
func (c *chain) io(box quantity, boxD float64, envA, envB map[string]string) string {
	m := c.m
	above, aboveD := box, boxD
	if ra, rb := m.get(fsReads); ra+rb > 0 { // traced with --fs
		var op *quantity
		var opD float64
		for _, q := range fsOps {
			x, y := m.get(q)
			if d := y - x; d*boxD > 0 && math.Abs(d/c.delta) >= minShare {
				c.step(q, "")
				if op == nil || d/boxD > opD/boxD {
					op, opD = &q, d
				}
			}
		}
		c.missRatio()
		if op == nil || opD/boxD < explainsHalf {
			return "; the file system calls explain less than half of it: unexplained above the file system (time in the kernel outside file calls: page faults, another process's I/O)"
		}
		above, aboveD = *op, opD
		if e := c.engine(above, aboveD, cmp.Or(envB["engine"], envA["engine"])); e != "" {
			return e
		}
	}
	b := c.step(blkBusy, "")
	c.step(blkQueue, "")
	c.step(blkDevice, "")
	blkD := b.B - b.A
	dev := ""
	if d := envB["device"]; d != "" {
		dev = " " + d
	}
	if f := envB["backing_file"]; f != "" {
		dev += " (a loop device over " + f + ")"
	}
	if blkD*aboveD > 0 && blkD/aboveD >= explainsHalf {
		qa, qb := c.m.get(blkQueue)
		da, db := c.m.get(blkDevice)
		where := "the device"
		if qb-qa > db-da {
			where = "the block queue (above the device, below the file system)"
		}
		return fmt.Sprintf(", in %s; block requests in flight %s per query, %s: the difference arises at the block device%s, in %s",
			c.what(above), FormatChange(int64(aboveD)), shareOf(blkD, aboveD, "it"), dev, where)
	}
	return fmt.Sprintf(", in %s (%s per query), while block requests did not follow (%s): the time is added above the block device (the file system, the page cache, or block cgroup throttling)",
		c.what(above), FormatChange(int64(aboveD)), FormatChange(int64(blkD)))
}

// engine is the step under a FUSE file system: the requests its daemon
// served. When they moved with the file system's time, the difference
// arises in the engine: "" when there is none, or it does not explain it.
func (c *chain) engine(above quantity, aboveD float64, name string) string {
	fa, fb := c.m.get(fuseReqs)
	if fa+fb == 0 {
		return ""
	}
	f := c.step(fuseReqs, "")
	c.step(engineNs, "")
	c.step(engineCPU, "")
	d := f.B - f.A
	if d*aboveD <= 0 || d/aboveD < explainsHalf {
		return ""
	}
	// The time each of B's reads of that kind gained.
	per, count := "read", fsReads
	if above.name == "fs_read_miss_ns" {
		per, count = "missed read", fsMisses
	}
	_, reads := c.m.get(count)
	name = engineName(name)
	return fmt.Sprintf(", in %s (%s per query, %s per %s), whose FUSE requests took %s per query: the difference arises in the userspace storage engine %s",
		c.what(above), FormatChange(int64(aboveD)), FormatChange(int64(aboveD/max(reads, 1))), per, FormatChange(int64(d)), name)
}

// missRatio adds the page cache's step: the share of reads that missed.
func (c *chain) missRatio() {
	reads, misses := [2]float64{}, [2]float64{}
	reads[0], reads[1] = c.m.get(fsReads)
	misses[0], misses[1] = c.m.get(fsMisses)
	var r [2]float64
	for i := range 2 {
		if reads[i] > 0 {
			r[i] = misses[i] / reads[i]
		}
	}
	s := Step{Name: "fs_read_miss_ratio", Layer: "page cache", What: fsMisses.what, A: r[0], B: r[1],
		Note: fmt.Sprintf("%.1f → %.1f reads per query", reads[0], reads[1])}
	if r[0] > 0 {
		s.Ratio = r[1] / r[0]
	}
	c.steps = append(c.steps, s)
}

// Figures formats a step's numbers for a table: A and B per query (a
// time, or for the page cache's miss ratio a percentage), B − A per query
// and the step's share of the change the chain follows ("" for the ratio:
// it is not a time, so it has no change in time nor a share of one).
func (s *Step) Figures() (a, b, change, share string) {
	if s.Layer == "page cache" {
		return fmt.Sprintf("%.1f%%", 100*s.A), fmt.Sprintf("%.1f%%", 100*s.B), "", ""
	}
	return dur(uint64(s.A)), dur(uint64(s.B)), FormatChange(int64(s.B - s.A)), ShareText(s.Share)
}

// ShareText writes a step's share of the change as a percentage within
// ±100%. A step can move by more than the whole (a box grew by 30 ms
// while the queries grew by 10 ms, because another box fell by 20 ms):
// its share, 300%, would read as a mistake, so it is said in words, and
// its time per query (B − A) is what to read.
func ShareText(share float64) string {
	switch p := math.Round(100 * share); {
	case p > 100:
		return "more than all"
	case p < -100:
		return "against, more than all"
	default:
		return fmt.Sprintf("%.0f%%", p+0) // +0: no "-0%"
	}
}

// PrintChain prints the steps of a verdict, one line each.
func PrintChain(w io.Writer, steps []Step) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nhow: per query, A's means weighted by B's queries of each fingerprint\n")
	fmt.Fprintf(w, "%-13s %-42s %10s %10s %10s %8s %13s\n", "layer", "what", "A", "B", "B-A", "B/A", "share")
	for _, s := range steps {
		a, b, change, share := s.Figures()
		fmt.Fprintf(w, "%-13s %-42.42s %10s %10s %10s %7.2fx %13s  %s\n", s.Layer, s.What, a, b, change, s.Ratio, share, s.Note)
	}
}
