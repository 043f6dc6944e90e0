// Package output renders model records as text and JSON lines. It reads
// only the model, so every command and later the recordings and the
// exporter print the same numbers the same way.
package output

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
)

var dur = hist.FormatDuration

// AppendSlowLine appends one slow-log line, in the spirit of Gregg's mysqld
// slow-query logger, with the query's waterfall in parentheses:
// "query 538ms (cpu 21ms, io wait 509ms), fs 509ms (83 I/O, 3.1MiB, 80 waited
// 505ms), blk 490ms (80 req, 3.0MiB) : SELECT …". Boxes that are zero are
// left out, except CPU, and so are fs and blk when the query made no such
// call or request. The other-wait box names the wait event that holds most
// of it: "other wait 91.2ms (IPC/CheckpointDone)". It appends to a caller's buffer without fmt: a busy
// database can ask for tens of thousands a second.
func AppendSlowLine(b []byte, q *model.Query) []byte {
	b = q.TS.AppendFormat(b, "15:04:05.000")
	b = append(b, " pid "...)
	b = strconv.AppendInt(b, int64(q.PID), 10)
	b = append(append(b, ' '), Who(q)...)
	if q.Application != "" {
		b = append(append(b, ' '), Application(q)...)
	}
	b = append(append(b, " query "...), dur(q.QueryNs)...)
	switch q.Statements {
	case 0: // a portal suspended at its row limit: its statement goes on
		b = append(b, " in part"...)
	case 1:
	default: // statements whose replies went out together: their time is shared
		b = strconv.AppendInt(append(b, " for "...), int64(q.Statements), 10)
		b = append(b, " statements"...)
	}
	if q.PortalsEnded > 0 { // their time is in the records of their parts
		b = append(b, ", ended with their portal"...)
	}
	if q.Failed > 0 {
		b = strconv.AppendInt(append(b, ", "...), int64(q.Failed), 10)
		b = append(b, " failed"...)
	}
	for i, box := range model.Boxes {
		ns := *box.Of(q)
		if ns == 0 && i > 0 { // the first box, CPU, always
			continue
		}
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		b = append(append(append(append(b, sep...), box.Short...), ' '), dur(ns)...)
		if box.Of(q) == &q.OtherWaitNs && ns > 0 {
			if event := dominantOtherWait(q); event != "" {
				b = append(append(append(b, " ("...), event...), ')')
			}
		}
	}
	b = append(b, ')')
	if q.FSCount() > 0 { // none, too, when file system calls are not traced (no --fs)
		b = append(append(b, ", fs "...), dur(q.FSNs())...)
		b = strconv.AppendUint(append(b, " ("...), q.FSCount(), 10)
		b = append(append(b, " I/O, "...), hist.FormatBytes(q.FSReadBytes+q.FSWriteBytes)...)
		if q.FSReadMissCount > 0 {
			b = strconv.AppendUint(append(b, ", "...), q.FSReadMissCount, 10)
			b = append(append(b, " waited "...), dur(q.FSReadMissNs)...)
		}
		if q.FSSyncCount > 0 {
			b = strconv.AppendUint(append(b, ", "...), q.FSSyncCount, 10)
			b = append(append(b, " sync "...), dur(q.FSSyncNs)...)
		}
		b = append(b, ')')
	}
	if q.AIOReadCount > 0 {
		b = append(append(b, ", io workers "...), dur(q.AIOReadNs)...)
		b = strconv.AppendUint(append(b, " ("...), q.AIOReadCount, 10)
		b = append(append(append(b, " reads, "...), hist.FormatBytes(q.AIOReadBytes)...), ')')
	}
	if q.SharedHit+q.SharedRead > 0 {
		b = strconv.AppendUint(append(b, ", shared buffers "...), q.SharedHit, 10)
		b = strconv.AppendUint(append(b, " hit "...), q.SharedRead, 10)
		b = append(b, " read"...)
	}
	if q.BlkCount > 0 {
		b = append(append(b, ", blk "...), dur(q.BlkNs)...)
		b = strconv.AppendUint(append(b, " ("...), q.BlkCount, 10)
		b = append(append(append(b, " req, "...), hist.FormatBytes(q.BlkBytes)...), ')')
	}
	b = append(b, " : "...)
	if strings.ContainsAny(q.Query, "\n\r\t") { // raw SQL: keep the line one line
		return append(b, OneLine(q.Query)...)
	}
	return append(b, q.Query...)
}

// ProcessLine is one line for the run of a background process:
// "autovacuum worker pid 4711 ran 4.1s: cpu 1.02s (user 812ms, sys 208ms),
// fs read 2.9s (356 I/O, 2.8MiB), write 12ms (3), sync 0ns (0)".
func ProcessLine(p *model.Process) string {
	id := fmt.Sprintf("pid %d", p.PID)
	if p.TID != 0 { // a MySQL server's thread
		id += fmt.Sprintf(" tid %d", p.TID)
	}
	return fmt.Sprintf("%s %s %s ran %s: cpu %s (user %s, sys %s), fs read %s (%d I/O, %s), write %s (%d, %s), sync %s (%d)",
		p.TS.Format("15:04:05.000"), p.Role, id, dur(p.ElapsedNs), dur(p.CPUNs), dur(p.CPUUserNs), dur(p.CPUSysNs),
		dur(p.FSReadNs), p.FSReadCount, hist.FormatBytes(p.FSReadBytes), dur(p.FSWriteNs), p.FSWriteCount,
		hist.FormatBytes(p.FSWriteBytes), dur(p.FSSyncNs), p.FSSyncCount)
}

// dominantOtherWait names the wait event that holds most of a query's
// "other wait" box, more than half of it, or "" if none does: "other" says
// only what the time was not, and the event (IPC/CheckpointDone,
// Timeout/PgSleep, Client/Net) says what it was. The box holds the events
// of every class but those the kernel charges to boxes of their own
// (box_of_sleep in sched.bpf.c, thd_wait_box in lock.bpf.c): IO (and
// PostgreSQL 18's asynchronous I/O wait, an IO event), Lock and LWLock.
func dominantOtherWait(q *model.Query) string {
	var top string
	var topNs uint64
	for name, ns := range q.Waits {
		class, _, _ := strings.Cut(name, "/")
		switch {
		case class == "IO" || class == "Lock" || class == "LWLock":
			continue
		case name == model.OtherWaitEvents: // several events summed: no one name
			continue
		case ns > topNs || ns == topNs && name < top: // the same name every time
			top, topNs = name, ns
		}
	}
	if 2*topNs <= q.OtherWaitNs {
		return ""
	}
	return top
}

// SlowLine is AppendSlowLine as a string.
func SlowLine(q *model.Query) string { return string(AppendSlowLine(nil, q)) }

// Tree prints one query's waterfall down the stack: every box of its time,
// with the file system and block I/O behind the I/O wait.
func Tree(w io.Writer, q *model.Query) {
	pct := func(ns uint64) string {
		if q.QueryNs == 0 {
			return ""
		}
		return fmt.Sprintf("%3.0f%%", 100*float64(ns)/float64(q.QueryNs))
	}
	who := Who(q)
	if q.Application != "" {
		who += " " + Application(q)
	}
	if q.Via != "" {
		who += " " + Pooled(q)
	}
	fmt.Fprintf(w, "\nquery %s  %s pid %d %s\n  %s\n", dur(q.QueryNs), q.TS.Format("15:04:05.000"), q.PID, who, OneLine(q.Query))
	for i, box := range model.Boxes {
		ns := *box.Of(q)
		branch := "├─"
		if i == len(model.Boxes)-1 {
			branch = "└─"
		}
		fmt.Fprintf(w, "  %s %-15s %9s %s", branch, box.Title, dur(ns), pct(ns))
		if box.Detail != "" && ns > 0 {
			fmt.Fprintf(w, "  (%s)", box.Detail)
		}
		fmt.Fprintln(w)
	}
	if len(q.Waits) > 0 {
		fmt.Fprintf(w, "  asleep by wait event: %s\n", WaitsText(q.Waits))
	}
	// File system calls run partly on CPU (page-cache copies) and partly in
	// I/O wait, so they overlap the boxes above rather than sit in one.
	if q.FSCount() > 0 || q.BlkCount > 0 {
		fmt.Fprintf(w, "  I/O, across the boxes above:\n")
	}
	if q.FSCount() > 0 {
		fmt.Fprintf(w, "     file system    %9s in %d calls: %d reads (%s): %d page-cache hits %s, %d misses %s, readahead %d pages; %d writes %s; %d syncs %s\n",
			dur(q.FSNs()), q.FSCount(), q.FSReadCount, hist.FormatBytes(q.FSReadBytes), q.FSReadHitCount, dur(q.FSReadHitNs),
			q.FSReadMissCount, dur(q.FSReadMissNs), q.ReadaheadPages, q.FSWriteCount, dur(q.FSWriteNs), q.FSSyncCount, dur(q.FSSyncNs))
	}
	if q.AIOReadCount > 0 {
		fmt.Fprintf(w, "     I/O workers    %9s in %d reads (%s) done for it\n", dur(q.AIOReadNs), q.AIOReadCount, hist.FormatBytes(q.AIOReadBytes))
	}
	if q.PrefetchCount > 0 {
		fmt.Fprintf(w, "     prefetch                 %d read-ahead advice calls for %s\n", q.PrefetchCount, hist.FormatBytes(q.PrefetchBytes))
	}

	if q.BlkCount > 0 {
		fmt.Fprintf(w, "     block device   %9s busy with %d requests (%s): queue %s, device %s (summed over requests)\n",
			dur(q.BlkNs), q.BlkCount, hist.FormatBytes(q.BlkBytes), dur(q.BlkQueueNs), dur(q.BlkDeviceNs))
	}
}

// OneLine puts a query's text on one line (raw SQL has newlines and tabs),
// its runs of white space made one space.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Who names a query's session: user@database, or the role when the
// process title was not seen.
func Who(q *model.Query) string {
	if q.User == "" && q.Database == "" {
		return q.Role
	}
	return q.User + "@" + q.Database
}

// Pooled names a query's client behind a pooler in a line of text:
// "from 127.0.0.1:5678 via pgbouncer pid 42" ("from pid 99" for a unix
// socket's client, nothing for one not known).
func Pooled(q *model.Query) string {
	switch {
	case q.ClientAddr != "":
		return "from " + net.JoinHostPort(q.ClientAddr, strconv.Itoa(q.ClientPort)) + " via " + q.Via
	case q.ClientPID != 0:
		return "from pid " + strconv.Itoa(q.ClientPID) + " via " + q.Via
	}
	return "via " + q.Via
}

// Application names a query's application in a line of text: app=NAME,
// the name quoted (Go's syntax) when it has spaces, quotes or backslashes,
// so that the line still splits into its words; "" when none is known.
func Application(q *model.Query) string {
	if q.Application == "" {
		return ""
	}
	if strings.ContainsAny(q.Application, " \"\\") {
		return "app=" + strconv.Quote(q.Application)
	}
	return "app=" + q.Application
}

// Hists prints each non-empty histogram down the stack with its count,
// mean and percentiles, then the bars.
func Hists(w io.Writer, hs model.Hists) error {
	shown := 0
	for _, def := range model.Histograms {
		h := hs[def.Name]
		if h == nil || h.Count == 0 {
			continue
		}
		shown++
		format := Format(def.Unit)
		fmt.Fprintf(w, "\n%s: count %d, mean %s, p50 %s, p99 %s\n", def.Title, h.Count,
			format(uint64(h.Mean())), format(h.Quantile(0.5)), format(h.Quantile(0.99)))
		if err := h.Render(w, def.Unit); err != nil {
			return err
		}
	}
	if shown == 0 {
		_, err := fmt.Fprintln(w, "\nno I/O or queries seen")
		return err
	}
	return nil
}

// WaitHists prints the sleeps of queries by wait event, the events with
// the most time first.
func WaitHists(w io.Writer, hs model.Hists) error {
	for _, name := range ByTotal(hs) {
		h := hs[name]
		fmt.Fprintf(w, "\nsleeps of queries on wait event %s: count %d, total %s, mean %s, p50 %s, p99 %s\n", name, h.Count,
			dur(h.Sum), dur(uint64(h.Mean())), dur(h.Quantile(0.5)), dur(h.Quantile(0.99)))
		if err := h.Render(w, hist.Time); err != nil {
			return err
		}
	}
	return nil
}

// ByTotal lists histograms' names, the most total time first.
func ByTotal(hs model.Hists) []string {
	names := make([]string, 0, len(hs))
	for name, h := range hs {
		if h != nil && h.Count > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(hs[b].Sum, hs[a].Sum); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return names
}

// WaitsText lists a query's wait events with their time, the most first:
// "Lock/relation 1.2s, IO/DataFileRead 30ms".
func WaitsText(waits map[string]uint64) string {
	names := make([]string, 0, len(waits))
	for name := range waits {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(waits[b], waits[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + dur(waits[name])
	}
	return strings.Join(parts, ", ")
}

// Format is how values of a unit are written: durations or sizes.
func Format(u hist.Unit) func(uint64) string {
	if u == hist.Bytes {
		return hist.FormatBytes
	}
	return dur
}

// Rates prints one interval as a table, iostat style.
func Rates(w io.Writer, iv *model.Interval) {
	fmt.Fprintf(w, "\n%s  %d queries\n%s\n", iv.TS.Format("15:04:05"), iv.Queries, RatesHeader())
	for i := range iv.Rates {
		fmt.Fprintln(w, RateLine(&iv.Rates[i]))
	}
	if len(iv.Rates) == 0 {
		fmt.Fprintln(w, "(no I/O)")
	}
}

// RatesHeader is the header of the rates table (iops, top).
func RatesHeader() string {
	return fmt.Sprintf("%-5s %-28s %-8s %9s %10s %9s %10s %8s %9s", "layer", "role", "device", "r/s", "rKiB/s", "w/s", "wKiB/s", "sync/s", "avg")
}

// RateLine is one row of the rates table.
func RateLine(r *model.Rate) string {
	dev := r.Device
	if dev == "" {
		dev = "-"
	}
	return fmt.Sprintf("%-5s %-28s %-8s %9.1f %10.1f %9.1f %10.1f %8.1f %9s", r.Layer, r.Role, dev,
		r.ReadOps, r.ReadBytes/1024, r.WriteOps, r.WriteBytes/1024, r.SyncOps+r.OtherOps, dur(uint64(r.AvgNs)))
}

// Summary is the closing line of every text output: what was traced and
// everything that was lost.
func Summary(w io.Writer, s *model.Summary) {
	fmt.Fprintf(w, "\ntraced %.1fs, server %s, %d queries", s.Seconds, pids(s.Instances), s.Queries)
	if s.Reported > 0 || s.Queries > 0 {
		fmt.Fprintf(w, ", %d reported", s.Reported)
	}
	if len(s.Traced) > 0 {
		fmt.Fprintf(w, "; probes: %s", strings.Join(s.Traced, ", "))
		if !slices.Contains(s.Traced, "fs") {
			fmt.Fprintf(w, " (file system calls not timed: --fs)")
		}
	}
	fmt.Fprintf(w, "; %s\n", DropsText(s.Drops))
	if len(s.OTLP) > 0 {
		fmt.Fprintln(w, OTLPText(s.OTLP))
	}
	if s.Cost != nil {
		fmt.Fprintf(w, "%s\n", CostText(s.Cost, s.Seconds))
	}
}

// CostText says what dbiolat cost: the kernel side (its programs run in
// the traced processes' time), then its own process.
func CostText(c *model.Cost, seconds float64) string {
	own := fmt.Sprintf("dbiolat itself %s CPU (%.2f%% of one CPU), %s peak memory, BPF maps %s",
		dur(c.CPUNs), float64(c.CPUNs)/1e7/max(seconds, 1e-9), hist.FormatBytes(c.MaxRSSBytes), hist.FormatBytes(c.BPFMapBytes))
	if c.BPFSampledSeconds == 0 {
		return "cost: BPF run time not counted (the kernel refused, or the trace was too short); " + own
	}
	text := fmt.Sprintf("cost: BPF %.2f%% of one CPU, %.0f runs/s (counted in %.1fs of it)", c.BPFCPUPerSec*100, c.BPFRunsPerSec, c.BPFSampledSeconds)
	if len(c.Programs) > 0 && c.Programs[0].Runs > 0 {
		p := c.Programs[0]
		text += fmt.Sprintf(", most in %s (%.0fns a run)", p.Name, float64(p.RunNs)/float64(p.Runs))
	}
	return text + "; " + own
}

func pids(ps []int) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("pid %d", p))
	}
	return strings.Join(out, ", ")
}

// DropsText names every non-zero counter: first what was lost, then what
// was seen but not charged to a query; or says nothing was dropped.
func DropsText(d model.Drops) string {
	var lost, notes []string
	for _, c := range model.Counters {
		if n := d[c.Name]; n > 0 {
			part := fmt.Sprintf("%d %s", n, c.Text)
			if c.Loss {
				lost = append(lost, part)
			} else {
				notes = append(notes, part)
			}
		}
	}
	text := "nothing dropped"
	if len(lost) > 0 {
		text = "DROPPED: " + strings.Join(lost, ", ")
	}
	if len(notes) > 0 {
		text += "; " + strings.Join(notes, ", ")
	}
	return text
}

// JSON writes one object per line.
type JSON struct{ enc *json.Encoder }

// NewJSON writes JSON lines to w.
func NewJSON(w io.Writer) *JSON {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return &JSON{enc: e}
}

// Write writes one record.
func (j *JSON) Write(v any) error { return j.enc.Encode(v) }
