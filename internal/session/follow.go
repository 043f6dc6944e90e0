package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
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
// postmaster of no traced server (ServerName: its data directory and
// container). One back from a restart is restarted's.
func (s *Session) started() {
	found, err := postgres.Discover()
	if err != nil {
		return
	}
	for _, in := range found {
		name := s.nameOf(in)
		if slices.ContainsFunc(s.Instances, func(known postgres.Instance) bool {
			return known.PID == in.PID || s.nameOf(known) == name
		}) {
			continue
		}
		if err := s.attach(in); err != nil {
			continue // still starting: try next time
		}
		s.Instances = append(s.Instances, in)
		s.warn(fmt.Sprintf("PostgreSQL pid %d (%s) has started: tracing it", in.PID, name))
	}
}

// restarted re-attaches to the instances that restarted: the same server
// (ServerName) under a new postmaster. It is found by discovery, not by
// its data directory's path: the host may not see that path (a
// container's), or see another server's there.
func (s *Session) restarted() {
	var found []postgres.Instance // looked for once a call, if one is gone
	for i, in := range s.Instances {
		if now, err := postgres.ByPID(in.PID); err == nil && now.DataDir == in.DataDir {
			continue // still the same postmaster
		}
		name := s.nameOf(in)
		if !s.gone[in.PID] {
			s.gone[in.PID] = true
			s.warn(fmt.Sprintf("PostgreSQL pid %d (%s) has exited: waiting for it to come back", in.PID, name))
		}
		if found == nil {
			found, _ = postgres.Discover()
		}
		j := slices.IndexFunc(found, func(f postgres.Instance) bool { return f.PID != in.PID && s.nameOf(f) == name })
		if j < 0 {
			continue // not back yet
		}
		next := found[j]
		if err := s.attach(next); err != nil {
			continue // still starting, or going again: try next time
		}
		delete(s.gone, in.PID)
		s.Instances[i] = next
		s.warn(fmt.Sprintf("PostgreSQL on %s is back as pid %d: tracing it", name, next.PID))
	}
}

// nameOf is an instance's model.ServerName.
func (s *Session) nameOf(in postgres.Instance) string {
	c, known := s.containers[in.PID]
	if _, attached := s.instances[in.PID]; !attached && !known {
		found, _ := container.Of(in.PID)
		c = &found
	}
	return model.ServerName(in.DataDir, c)
}
