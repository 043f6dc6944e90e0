package output

// Who took the CPUs a backend waited for: the step of the verdict that
// tells a storage engine whose threads took them (measured in the kernel:
// the run-queue wait behind the engine) from other threads, and the
// backend's own CPU spent inside its file calls (the I/O stack's).

import "fmt"

// Who took the CPUs a backend waited for, when its time on or waiting for
// a CPU, or an I/O wait, leads the change.
type cpuTaker int

const (
	noEngine   cpuTaker = iota // no storage engine, or the backend's CPU side did not grow: said as before
	engineTook                 // the storage engine's threads
	othersTook                 // other threads: less than half of the new contention was the engine's
)

// taking is what cpusTaken weighed, per query (B − A).
type taking struct {
	runqD   float64 // the run-queue wait's change
	behindD float64 // of it, behind the engine's threads (runq_engine_ns), when measured
	// othersD is the wait behind other threads beyond A's per wait, for
	// B's waits (at least 0): other threads taking more of the CPUs.
	othersD float64
	waitsA  float64 // the run-queue waits per query, A's and B's
	waitsB  float64
	engineD float64 // the engine's CPU serving the queries (engine_cpu_ns); 0: not measured (no --fs)
	// measured: both recordings measured runq_engine_ns, and the rule
	// weighed it; else it weighed engine_cpu_ns (older recordings).
	measured bool
	cpu      bool // engine_cpu_ns was measured on a side
}

// figures says how the engine took the CPUs: the run-queue wait's change
// (with share, when given), the part behind the engine, its CPU.
func (t taking) figures(share string) string {
	runq := fmt.Sprintf("their run-queue wait %s per query", FormatChange(int64(t.runqD)))
	if share != "" {
		runq += ", " + share
	}
	if !t.measured {
		return fmt.Sprintf("its CPU serving the queries %s per query, %s", FormatChange(int64(t.engineD)), runq)
	}
	s := fmt.Sprintf("%s, %s of it behind the engine's threads", runq, FormatChange(int64(t.behindD)))
	if t.cpu {
		s += fmt.Sprintf(", which served the queries with %s of CPU per query", FormatChange(int64(t.engineD)))
	}
	switch { // the rest is most of it: say why it is not others'
	case t.behindD >= explainsHalf*t.runqD:
	case t.othersD == 0:
		s += fmt.Sprintf(", the rest behind other threads no longer a wait than in A, in %.0f waits per query instead of %.0f", t.waitsB, t.waitsA)
	default:
		s += fmt.Sprintf(", %s behind other threads beyond A's wait behind them per wait", FormatChange(int64(t.othersD)))
	}
	return s
}

// cpusTaken decides whether a userspace storage engine (a FUSE daemon)
// took the CPUs the backend needed. A run-queue wait is the kernel's own
// measure of a CPU shortage: the backend was ready to run while other
// threads held every CPU it may use (the machine's, or fewer under taskset
// or a cpuset), i.e. fewer CPUs than busy threads at that moment. Which
// threads held them the kernel side measures (runq_engine_ns): of each
// wait, the part that ended with an engine's thread leaving the CPU to
// the backend. The rest, behind other threads, grows with how often the
// backend waits even when nothing else changed: a backend woken for each
// of a FUSE engine's answers waits for the CPU after each, behind whatever
// else runs there, as A's did fewer times. So other threads took more of
// the CPUs only by the part of it beyond A's wait behind them per wait,
// for B's waits (othersD; runq_waits counts them). When the wait behind the
// engine grew by a step's worth (minShare) and by at least half of the new
// contention (its own growth and othersD; explainsHalf, as each layer of
// the chain must explain the one above), the engine took the CPUs, and it
// is named first. Else other threads took them (a CPU hog, other
// backends), and the engine is said not to explain it. Recordings made
// before runq_engine_ns was measured (measured false) are weighed by the
// engine's CPU serving the queries (engine_cpu_ns) against the run-queue
// wait's growth instead, with the same half: it misses the engine's work
// that no traced request asked for (its own readahead, the moments after
// each answer), and is not measured without --fs, when nothing is weighed.
// The engine cannot take the backend's own time on CPU: when on CPU leads,
// the engine comes first only if the run-queue wait grew by at least half
// as much (the shortage, not the backend's own work, is then a main part).
// When an I/O wait leads (on one CPU, the engine's serving of the
// requests the backend waits for is I/O wait), or on CPU does inside file
// system calls (cpuInFileCalls), the chain follows it first, and the
// engine that also took the CPUs is said after it. Only a
// growth is weighed (B's engine taking more than A's), and without an
// engine serving the queries, or with no run-queue growth worth a step
// (minShare), nothing changes: the CPU side is not in the I/O stack.
func (c *chain) cpusTaken(lead quantity, engine string, measured, inCalls bool) (cpuTaker, taking) {
	if lead.name != "runq_ns" && lead.name != "cpu_ns" && !isIOWait(lead) || c.delta <= 0 {
		return noEngine, taking{}
	}
	fa, fb := c.m.get(fuseReqs)
	ea, eb := c.m.get(engineCPU)
	ba, bb := c.m.get(runqEngine)
	ra, rb := c.m.a["runq_ns"], c.m.b["runq_ns"] // boxes: model.Boxes' names
	ca, cb := c.m.a["cpu_ns"], c.m.b["cpu_ns"]
	wa, wb := c.m.get(runqWaits)
	t := taking{runqD: rb - ra, behindD: bb - ba, engineD: eb - ea, waitsA: wa, waitsB: wb, measured: measured, cpu: ea+eb > 0}
	if fa+fb == 0 && engine == "" || !measured && !t.cpu || t.runqD/c.delta < minShare || lead.name == "cpu_ns" && !inCalls && t.runqD < explainsHalf*(cb-ca) {
		return noEngine, t
	}
	if !measured {
		if t.cpu {
			c.step(engineCPU, "")
		}
		if t.engineD >= explainsHalf*t.runqD {
			return engineTook, t
		}
		return othersTook, t
	}
	// A's wait behind other threads per wait, for B's waits.
	expected := ra - ba
	if wa > 0 {
		expected *= wb / wa
	}
	t.othersD = max(0, rb-bb-expected)
	c.step(runqEngine, "")
	if t.cpu {
		c.step(engineCPU, "")
	}
	if t.behindD/c.delta >= minShare && t.behindD >= explainsHalf*(t.behindD+t.othersD) {
		return engineTook, t
	}
	return othersTook, t
}

// cpuInFileCalls says whether the backend's time on CPU, leading the
// change, grew inside file system calls (traced with --fs): a FUSE file
// system's reads cost the backend's CPU too, in the kernel's FUSE client,
// which is the I/O stack's. A file call's time is the thread's time on
// CPU, in the run queue and asleep within it; the sleeps are I/O wait. So
// the calls' growth less the I/O wait's and the run-queue wait's growths
// is at most what of the CPU's growth was inside them: when that is at
// least half of it, the chain follows the CPU down the I/O stack as it
// does an I/O wait. It returns that part too, per query.
func (c *chain) cpuInFileCalls(lead quantity, leadD float64) (bool, float64) {
	if ra, rb := c.m.get(fsReads); lead.name != "cpu_ns" || leadD <= 0 || ra+rb == 0 {
		return false, 0
	}
	var calls float64
	for _, q := range fsOps {
		x, y := c.m.get(q)
		calls += y - x
	}
	io := c.m.b["io_wait_ns"] - c.m.a["io_wait_ns"]
	runq := c.m.b["runq_ns"] - c.m.a["runq_ns"]
	awake := calls - max(0, io) - max(0, runq)
	return awake >= explainsHalf*leadD, awake
}
