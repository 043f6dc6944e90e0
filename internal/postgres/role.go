package postgres

import (
	"strconv"
	"strings"
)

// Role is what a PostgreSQL process does, from its process title.
type Role string

// The roles of PostgreSQL 13-18 processes, as named in their titles.
const (
	Postmaster       Role = "postmaster"
	ClientBackend    Role = "client backend"
	AutovacuumWorker Role = "autovacuum worker"
	AutovacuumLaunch Role = "autovacuum launcher"
	Checkpointer     Role = "checkpointer"
	BackgroundWriter Role = "background writer"
	WalWriter        Role = "walwriter"
	WalSender        Role = "walsender"
	WalReceiver      Role = "walreceiver"
	ParallelWorker   Role = "parallel worker"
	LogicalLauncher  Role = "logical replication launcher"
	LogicalWorker    Role = "logical replication worker"
	Archiver         Role = "archiver"
	Startup          Role = "startup"
	StatsCollector   Role = "stats collector"
	IOWorker         Role = "io worker"
	WalSummarizer    Role = "walsummarizer"
	SlotsyncWorker   Role = "slotsync worker"
	BackgroundWorker Role = "background worker"
	Unknown          Role = "unknown"
)

// Background roles in the order their title starts with them. Longer
// names first where one is a prefix of another.
var titled = []Role{
	AutovacuumWorker, AutovacuumLaunch, Checkpointer, BackgroundWriter, WalWriter,
	WalSender, WalReceiver, ParallelWorker, LogicalLauncher, LogicalWorker,
	Archiver, Startup, StatsCollector, IOWorker, WalSummarizer, SlotsyncWorker,
}

// Process is what a process title tells.
type Process struct {
	Role       Role
	Database   string // client backends and walsenders
	User       string
	ClientAddr string // a client backend's peer: "" over a unix socket
	ClientPort int
}

// ParseTitle reads a process title as PostgreSQL sets it:
// "postgres: [cluster_name: ]checkpointer" for background processes and
// "postgres: [cluster_name: ]user database host activity" for backends.
// A title that does not start with "postgres: " is the postmaster's
// command line (or a process that has just forked and not yet set it).
func ParseTitle(title string) Process {
	title = strings.TrimRight(strings.ReplaceAll(title, "\x00", " "), " ")
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return Process{Role: Postmaster}
	}
	if p, ok := background(rest); ok {
		return p
	}
	// cluster_name is printed before the title, ended by ": ".
	if i := strings.Index(rest, ": "); i >= 0 && len(strings.Fields(rest[:i])) == 1 {
		rest = rest[i+2:]
		if p, ok := background(rest); ok {
			return p
		}
	}
	// Extensions' workers carry their own names ("TimescaleDB Background Worker…").
	if strings.Contains(strings.ToLower(rest), "worker") && !strings.Contains(rest, "[") {
		return Process{Role: BackgroundWorker}
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return Process{Role: Unknown}
	}
	p := Process{Role: ClientBackend, User: f[0], Database: f[1]}
	// The client: "[local]", or "host(port)" (an address, or a name with log_hostname).
	if len(f) > 2 && f[2] != "[local]" {
		if i := strings.LastIndexByte(f[2], '('); i > 0 && strings.HasSuffix(f[2], ")") {
			p.ClientAddr = f[2][:i]
			p.ClientPort, _ = strconv.Atoi(f[2][i+1 : len(f[2])-1])
		}
	}
	return p
}

func background(s string) (Process, bool) {
	for _, r := range titled {
		if !strings.HasPrefix(s, string(r)) {
			continue
		}
		p := Process{Role: r}
		if r == WalSender { // "walsender user host activity"
			if f := strings.Fields(s[len(r):]); len(f) > 0 {
				p.User = f[0]
			}
		}
		return p, true
	}
	return Process{}, false
}
