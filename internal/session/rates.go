package session

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
)

// totals is one reading of the kernel's cumulative counters.
type totals struct {
	at   time.Time
	proc map[uint32]probe.ProcIO
	blk  map[probe.BlkKey]probe.BlkIO
}

// Interval returns what happened since the previous call (or since the
// session started): I/O per second by layer, role and device, and queries.
func (s *Session) Interval() (*model.Interval, error) {
	drops, queries, err := s.counters()
	if err != nil {
		return nil, err
	}
	iv := &model.Interval{Type: "interval", TS: time.Now(), Queries: queries - s.prevQueries, Drops: drops}
	s.prevQueries = queries
	iv.Rates, iv.Seconds, err = s.rates()
	return iv, err
}

func (s *Session) rates() ([]model.Rate, float64, error) {
	cur := totals{at: time.Now()}
	var err error
	if cur.proc, err = s.tracer.ProcTotals(); err != nil {
		return nil, 0, err
	}
	if cur.blk, err = s.tracer.BlkTotals(); err != nil {
		return nil, 0, err
	}
	prev := s.prevTotals
	if prev.at.IsZero() {
		prev.at = s.start
	}
	s.prevTotals = cur
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return nil, 0, nil
	}

	type key struct{ layer, role, dev string }
	type sum struct {
		model.Rate
		ns, ops float64
	}
	rows := map[key]*sum{}
	row := func(k key) *sum {
		r := rows[k]
		if r == nil {
			r = &sum{Rate: model.Rate{Layer: k.layer, Role: k.role, Device: k.dev}}
			rows[k] = r
		}
		return r
	}
	for tgid, v := range cur.proc {
		p := prev.proc[tgid]
		r := row(key{"fs", string(s.describe(tgid).Role), ""})
		d := func(op probe.FSOp) (c, b, ns float64) {
			return float64(v.Fs[op].Count - p.Fs[op].Count), float64(v.Fs[op].Bytes - p.Fs[op].Bytes), float64(v.Fs[op].Ns - p.Fs[op].Ns)
		}
		rc, rb, rns := d(probe.FSRead)
		wc, wb, wns := d(probe.FSWrite)
		sc, _, sns := d(probe.FSSync)
		r.ReadOps += rc
		r.ReadBytes += rb
		r.WriteOps += wc
		r.WriteBytes += wb
		r.SyncOps += sc
		r.ns += rns + wns + sns
		r.ops += rc + wc + sc
		if !alive(tgid) {
			s.tracer.ForgetProc(tgid)
		}
	}
	for k, v := range cur.blk {
		p := prev.blk[k]
		role := "kernel"
		switch k.Owner {
		case probe.OwnerTraced:
			role = string(s.describe(k.Tgid).Role)
		case probe.OwnerOther:
			role = "other process"
		}
		r := row(key{"blk", role, deviceName(k.Dev)})
		c, b := float64(v.Io.Count-p.Io.Count), float64(v.Io.Bytes-p.Io.Bytes)
		switch k.Op {
		case probe.BlkRead:
			r.ReadOps += c
			r.ReadBytes += b
		case probe.BlkWrite:
			r.WriteOps += c
			r.WriteBytes += b
		default:
			r.OtherOps += c
		}
		r.ns += float64(v.Io.Ns - p.Io.Ns)
		r.ops += c
		if k.Owner == probe.OwnerTraced && !alive(k.Tgid) {
			s.tracer.ForgetBlk(k)
		}
	}

	var out []model.Rate
	for _, r := range rows {
		if r.ops == 0 {
			continue
		}
		r.AvgNs = r.ns / r.ops
		r.ReadOps /= secs
		r.ReadBytes /= secs
		r.WriteOps /= secs
		r.WriteBytes /= secs
		r.SyncOps /= secs
		r.OtherOps /= secs
		out = append(out, r.Rate)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Layer != b.Layer {
			return a.Layer > b.Layer // fs above blk: down the stack
		}
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		return a.Role < b.Role
	})
	return out, secs, nil
}

func alive(pid uint32) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// deviceName turns the kernel's dev_t (major << 20 | minor) into a name
// such as "vda", as iostat shows it.
func deviceName(dev uint32) string {
	major, minor := dev>>20, dev&(1<<20-1)
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", major, minor))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				return v
			}
		}
	}
	return fmt.Sprintf("%d:%d", major, minor)
}
