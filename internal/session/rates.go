package session

import (
	"fmt"
	"maps"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dbiolat/dbiolat/internal/hist"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/probe"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// totals is one reading of the kernel's cumulative counters.
type totals struct {
	at    time.Time
	proc  map[uint32]probe.ProcIO
	blk   map[probe.BlkKey]probe.BlkIO
	hists map[probe.UnitHist]probe.Hist // with Config.RatesByServer
}

// Interval returns what happened since the previous call (or since the
// session started): I/O per second by layer, role and device, and queries.
func (s *Session) Interval() (*model.Interval, error) {
	drops, queries, err := s.counters()
	if err != nil {
		return nil, err
	}
	iv := &model.Interval{Type: "interval", TS: time.Now(), Queries: queries - s.prevQueries, Records: s.records - s.prevRecords, Drops: drops}
	s.prevQueries, s.prevRecords = queries, s.records
	iv.Rates, iv.RoleHists, iv.Seconds, err = s.rates()
	return iv, err
}

// rateKey is one row of an interval: a layer, a role and, for block I/O,
// a device; and with Config.RatesByServer, a server and a database.
type rateKey struct{ layer, server, database, role, dev string }

// rateSum adds up the counters of one row before they become rates.
type rateSum struct {
	model.Rate
	ns, ops float64
}

type rateRows map[rateKey]*rateSum

func (rows rateRows) row(k rateKey) *rateSum {
	r := rows[k]
	if r == nil {
		r = &rateSum{Rate: model.Rate{Layer: k.layer, Server: k.server, Database: k.database, Role: k.role, Device: k.dev}}
		rows[k] = r
	}
	return r
}

// addFS adds what a process did at the file system layer between two readings.
func (rows rateRows) addFS(who rateKey, v, p probe.ProcIO) {
	who.layer = "fs"
	r := rows.row(who)
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
}

// addBlk adds what one block counter did between two readings.
func (rows rateRows) addBlk(who rateKey, k probe.BlkKey, v, p probe.BlkIO) {
	who.layer, who.dev = "blk", deviceName(k.Dev)
	r := rows.row(who)
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
}

// roleHists are the I/O histograms of the rows of an interval, by
// server, database and role (a rateKey without layer and device).
type roleHists map[rateKey]model.Hists

// add adds what a unit's histogram gained between two readings.
func (rh roleHists) add(who rateKey, name string, v, p probe.Hist) {
	hs := rh[who]
	if hs == nil {
		hs = model.Hists{}
		rh[who] = hs
	}
	h := hs[name]
	if h == nil {
		h = &hist.Hist{}
		hs[name] = h
	}
	for slot, n := range v.Slots {
		if n > p.Slots[slot] {
			h.AddSlot(slot, n-p.Slots[slot])
		}
	}
	h.Sum += v.Sum - p.Sum
}

// later lists the units whose counts wait for the next interval: when
// rows are split by server, those whose server is not known yet (a
// process that began and ended since Poll last looked: its exit record,
// which names it, is read by then). Once: a unit left for later last
// time goes in now, known or not.
func (s *Session) later(cur totals) map[uint32]bool {
	if !s.cfg.RatesByServer {
		return nil
	}
	now := map[uint32]bool{}
	check := func(unit uint32) {
		if _, seen := now[unit]; !seen {
			now[unit] = s.owner(unit) == 0 && !s.leftForLater[unit]
		}
	}
	for unit := range cur.proc {
		check(unit)
	}
	for k := range cur.blk {
		if k.Owner == probe.OwnerTraced {
			check(k.Unit)
		}
	}
	for k := range cur.hists {
		check(k.Unit)
	}
	maps.DeleteFunc(now, func(_ uint32, later bool) bool { return !later })
	s.leftForLater = now
	return now
}

// who is the row a unit's I/O goes in: its role and, if rows are split
// by them, its server and database.
func (s *Session) who(unit uint32) rateKey {
	p := s.describe(unit)
	k := rateKey{role: string(p.role)}
	if s.cfg.RatesByServer {
		k.server, k.database = s.server(s.owner(unit)).Name, p.database
	}
	return k
}

// owner is the server (its process's pid) a unit belongs to; 0: unknown.
func (s *Session) owner(unit uint32) int {
	if pid, ok := s.owners[unit]; ok {
		return pid
	}
	if pid, ok := s.tracer.ProcServer(unit); ok { // a process begun since Poll last walked them
		s.owners[unit] = pid
		return pid
	}
	for _, t := range s.current { // a thread of a server whose threads are units (MySQL's)
		pid := t.about().PID
		if _, err := os.Stat(procfs.Path(pid, "task", unit)); err == nil {
			s.owners[unit] = pid
			return pid
		}
	}
	return 0
}

// blkWho is the row of a block counter: a traced unit's, or I/O not ours.
func (s *Session) blkWho(k probe.BlkKey) rateKey {
	switch k.Owner {
	case probe.OwnerTraced:
		return s.who(k.Unit)
	case probe.OwnerOther:
		return rateKey{role: "other process"}
	}
	return rateKey{role: "kernel"}
}

// foldExited moves the counters of processes that exited out of the
// kernel's maps into the next interval's rows (by role, so bounded), so
// that connection churn cannot fill the maps, whether or not the command
// reads intervals. Poll calls it; a process's block requests still in
// flight at its exit are folded on a later call.
func (s *Session) foldExited() error {
	if len(s.exited) == 0 {
		return nil
	}
	if s.exitedIO == nil {
		s.exitedIO = rateRows{}
	}
	for _, pid := range s.unfolded {
		if v, ok := s.tracer.ProcTotal(pid); ok {
			s.exitedIO.addFS(s.who(pid), v, s.prevTotals.proc[pid])
			s.tracer.ForgetProc(pid)
		}
		delete(s.prevTotals.proc, pid)
	}
	s.unfolded = s.unfolded[:0]
	blk, err := s.tracer.BlkTotals()
	if err != nil {
		return err
	}
	for k, v := range blk {
		if _, gone := s.exited[k.Unit]; k.Owner == probe.OwnerTraced && gone {
			s.exitedIO.addBlk(s.blkWho(k), k, v, s.prevTotals.blk[k])
			s.tracer.ForgetBlk(k)
			delete(s.prevTotals.blk, k)
		}
	}
	hists, err := s.tracer.UnitHists()
	if err != nil {
		return err
	}
	for k, v := range hists {
		if _, gone := s.exited[k.Unit]; gone {
			if s.cfg.RatesByServer {
				if s.exitedHists == nil {
					s.exitedHists = roleHists{}
				}
				s.exitedHists.add(s.who(k.Unit), k.Name, v, s.prevTotals.hists[k])
			}
			s.tracer.ForgetUnitHist(k)
			delete(s.prevTotals.hists, k)
		}
	}
	return nil
}

func (s *Session) rates() ([]model.Rate, []model.RoleHists, float64, error) {
	if err := s.foldExited(); err != nil {
		return nil, nil, 0, err
	}
	cur := totals{at: time.Now()}
	var err error
	if cur.proc, err = s.tracer.ProcTotals(); err != nil {
		return nil, nil, 0, err
	}
	if cur.blk, err = s.tracer.BlkTotals(); err != nil {
		return nil, nil, 0, err
	}
	if s.cfg.RatesByServer {
		if cur.hists, err = s.tracer.UnitHists(); err != nil {
			return nil, nil, 0, err
		}
	}
	prev := s.prevTotals
	if prev.at.IsZero() {
		prev.at = s.start
	}
	s.prevTotals = cur
	rows, hists := s.exitedIO, s.exitedHists // what exited processes did since the last interval
	s.exitedIO, s.exitedHists = nil, nil
	if rows == nil {
		rows = rateRows{}
	}
	if hists == nil {
		hists = roleHists{}
	}
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return nil, nil, 0, nil
	}
	later := s.later(cur)
	for tgid, v := range cur.proc {
		if later[tgid] {
			cur.proc[tgid] = prev.proc[tgid]
			continue
		}
		rows.addFS(s.who(tgid), v, prev.proc[tgid])
	}
	for k, v := range cur.blk {
		if k.Owner == probe.OwnerTraced && later[k.Unit] {
			cur.blk[k] = prev.blk[k]
			continue
		}
		rows.addBlk(s.blkWho(k), k, v, prev.blk[k])
	}
	for k, v := range cur.hists {
		if later[k.Unit] {
			cur.hists[k] = prev.hists[k]
			continue
		}
		hists.add(s.who(k.Unit), k.Name, v, prev.hists[k])
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
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Server+"\x00"+a.Database < b.Server+"\x00"+b.Database
	})
	var byRole []model.RoleHists
	for k, hs := range hists {
		byRole = append(byRole, model.RoleHists{Server: k.server, Database: k.database, Role: k.role, Hists: hs})
	}
	return out, byRole, secs, nil
}

// deviceName turns the kernel's dev_t (major << 20 | minor) into a name
// such as "vda", as iostat shows it.
func deviceName(dev uint32) string {
	if name, ok := deviceNames.Load(dev); ok {
		return name.(string)
	}
	major, minor := dev>>20, dev&(1<<20-1)
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", major, minor))
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				deviceNames.Store(dev, v)
				return v
			}
		}
	}
	return fmt.Sprintf("%d:%d", major, minor)
}

// deviceNames holds the names read: every block counter's rows ask each
// second, and a device keeps its number while it exists.
var deviceNames sync.Map
