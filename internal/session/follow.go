package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/dbiolat/dbiolat/internal/container"
	"github.com/dbiolat/dbiolat/internal/model"
	"github.com/dbiolat/dbiolat/internal/procfs"
)

// A server can restart under a trace: an operator's restart, a crash and
// recovery, a package upgrade that replaced the server binary, a pod
// restarted. Its data directory stays; its main process, and perhaps the
// binary, are new. And when no server was named, a new one can start.
// Poll looks every followEvery, for every engine alike.
const followEvery = time.Second

// follow re-attaches to the servers that restarted and, when tracing
// every server of the host, attaches to those that started.
func (s *Session) follow() {
	if time.Since(s.followed) < followEvery {
		return
	}
	s.followed = time.Now()
	found := map[*engine][]server{} // each engine's servers, looked for once a call if needed
	running := func(e *engine) []server {
		if _, ok := found[e]; !ok {
			found[e], _ = e.discover()
			if found[e] == nil {
				found[e] = []server{}
			}
		}
		return found[e]
	}
	s.restarted(running)
	if s.cfg.discovers() {
		for _, e := range engines {
			s.started(running(e))
		}
	}
	s.followPoolers()
}

// started attaches to servers that started since the last look: a main
// process of no server traced (by name: its data directory and
// container). One back from a restart is restarted's.
func (s *Session) started(found []server) {
	for _, sv := range found {
		m := sv.about()
		if s.servers[m.PID] != nil || s.refused[m.PID] {
			continue
		}
		name := nameOf(sv)
		if slices.ContainsFunc(s.current, func(t *traced) bool { return t.describe().Name == name }) {
			continue
		}
		if _, err := sv.engine().protocol(s.cfg.Families); err != nil {
			s.refused[m.PID] = true
			s.warn(fmt.Sprintf("%s pid %d (%s) has started; not traced: %v", m.Kind, m.PID, name, err))
			continue
		}
		t, err := s.attach(sv)
		if err != nil {
			continue // still starting: try next time
		}
		s.current = append(s.current, t)
		s.warn(fmt.Sprintf("%s pid %d (%s) has started: tracing it", m.Kind, m.PID, name))
	}
}

// restarted re-attaches to the servers that restarted: the same server
// (by name) under a new main process. It is found by discovery, not by
// its data directory's path: the host may not see that path (a
// container's), or see another server's there.
func (s *Session) restarted(running func(*engine) []server) {
	for i, t := range s.current {
		m := t.describe()
		if now, ok := procfs.StartOf(m.PID); ok && now == t.started {
			continue // still the same process
		}
		if !t.gone {
			t.gone = true
			s.warn(fmt.Sprintf("%s pid %d (%s) has exited: waiting for it to come back", m.Kind, m.PID, m.Name))
		}
		j := slices.IndexFunc(running(t.engine()), func(sv server) bool { return sv.about().PID != m.PID && nameOf(sv) == m.Name })
		if j < 0 {
			continue // not back yet
		}
		next := running(t.engine())[j]
		nt, err := s.attach(next)
		if err != nil {
			continue // still starting, or going again: try next time
		}
		s.current[i] = nt
		s.warn(fmt.Sprintf("%s on %s is back as pid %d: tracing it", m.Kind, m.Name, next.about().PID))
	}
}

// nameOf is a server's model.ServerName, before it is attached.
func nameOf(sv server) string {
	m := sv.about()
	c, _ := container.Of(m.PID)
	return model.ServerName(m.DataDir, &c)
}
