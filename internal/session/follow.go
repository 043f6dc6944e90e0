package session

import (
	"fmt"
	"time"

	"github.com/dbiolat/dbiolat/internal/postgres"
)

// An instance can restart under a trace: an operator's restart, a crash
// and recovery, a package upgrade that replaced the server binary. Its
// data directory stays; its postmaster PID, and perhaps the binary, are
// new. Poll looks every followEvery and attaches to the new postmaster.
const followEvery = time.Second

// follow re-attaches to the instances that restarted.
func (s *Session) follow() {
	if time.Since(s.followed) < followEvery {
		return
	}
	s.followed = time.Now()
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
