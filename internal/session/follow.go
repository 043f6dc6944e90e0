package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/dbiolat/dbiolat/internal/postgres"
)

// An instance can restart under a trace: an operator's restart, a crash
// and recovery, a package upgrade that replaced the server binary. Its
// data directory stays; its postmaster PID, and perhaps the binary, are
// new. And when no instance was named, a new one can start. Poll looks
// every followEvery and attaches to the new postmasters.
const followEvery = time.Second

// follow re-attaches to the instances that restarted and, when tracing
// every instance of the host, attaches to those that started.
func (s *Session) follow() {
	if time.Since(s.followed) < followEvery {
		return
	}
	s.followed = time.Now()
	s.restarted()
	if s.cfg.PID == 0 && s.cfg.PGData == "" {
		s.started()
	}
}

// started attaches to instances that started since the last look: a
// postmaster whose data directory no traced instance has (a restart is
// restarted's).
func (s *Session) started() {
	found, err := postgres.Discover()
	if err != nil {
		return
	}
	for _, in := range found {
		if slices.ContainsFunc(s.Instances, func(known postgres.Instance) bool {
			return known.PID == in.PID || known.DataDir == in.DataDir
		}) {
			continue
		}
		if err := s.attach(in); err != nil {
			continue // still starting: try next time
		}
		s.Instances = append(s.Instances, in)
		s.warn(fmt.Sprintf("PostgreSQL pid %d (%s) has started: tracing it", in.PID, in.DataDir))
	}
}

// restarted re-attaches to the instances that restarted.
func (s *Session) restarted() {
	for i, in := range s.Instances {
		if now, err := postgres.ByPID(in.PID); err == nil && now.DataDir == in.DataDir {
			continue // still the same postmaster
		}
		if !s.gone[in.PID] {
			s.gone[in.PID] = true
			s.warn(fmt.Sprintf("PostgreSQL pid %d (%s) has exited: waiting for it to come back", in.PID, in.DataDir))
		}
		next, err := postgres.ByDataDir(in.DataDir)
		if err != nil || next.PID == in.PID {
			continue // not back yet
		}
		if err := s.attach(next); err != nil {
			continue // still starting, or going again: try next time
		}
		delete(s.gone, in.PID)
		s.Instances[i] = next
		s.warn(fmt.Sprintf("PostgreSQL on %s is back as pid %d: tracing it", in.DataDir, next.PID))
	}
}
