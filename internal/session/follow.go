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
// postmaster no traced instance has, and that is no traced server's
// (ServerName: data directory and container) back from a restart that
// restarted could not find by its data directory's path, which the
// host may not see, when it runs in a container.
func (s *Session) started() {
	found, err := postgres.Discover()
	if err != nil {
		return
	}
	for _, in := range found {
		if slices.ContainsFunc(s.Instances, func(known postgres.Instance) bool { return known.PID == in.PID }) {
			continue
		}
		name := s.nameOf(in)
		i := slices.IndexFunc(s.Instances, func(known postgres.Instance) bool { return s.nameOf(known) == name })
		if i >= 0 && !s.gone[s.Instances[i].PID] {
			continue // the known one still runs
		}
		if err := s.attach(in); err != nil {
			continue // still starting: try next time
		}
		if i >= 0 {
			delete(s.gone, s.Instances[i].PID)
			s.Instances[i] = in
			s.warn(fmt.Sprintf("PostgreSQL on %s is back as pid %d: tracing it", name, in.PID))
			continue
		}
		s.Instances = append(s.Instances, in)
		s.warn(fmt.Sprintf("PostgreSQL pid %d (%s) has started: tracing it", in.PID, name))
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
