package postgres

import (
	"strings"
	"testing"
)

// Where the expected values were confirmed, on throwaway servers
// (Debian 15.18, and 16.14, 17.10, 18.4 from embedded-postgres):
//
//	[psa]   pg_stat_activity of a backend really waiting there, with the raw
//	        code read from the backend's *my_wait_event_info (gdb).
//	[set]   pg_stat_activity of an idle backend whose *my_wait_event_info
//	        was overwritten with the code (gdb). Every code of every table
//	        was checked this way.
//	[pwe]   17 and 18: the name is listed in pg_wait_events.
//
// The stored PostgreSQL sources readable here are development snapshots,
// not release branches, so the servers are the reference.
func TestWaitEventName(t *testing.T) {
	for _, c := range []struct {
		version int
		code    WaitEvent
		want    string
	}{
		// IO/DataFileRead: 17th IO event until 18 put the AIO events first. [set]
		{15, 0x0A000011, "IO/DataFileRead"},
		{16, 0x0A000011, "IO/DataFileRead"},
		{17, 0x0A000011, "IO/DataFileRead"}, // [pwe]
		{18, 0x0A000015, "IO/DataFileRead"}, // [pwe]
		{19, 0x0A000017, "IO/DataFileRead"}, // [live]: TestWaitEventTablesLive
		{19, 0x04000002, "Buffer/BufferShared"},
		{18, 0x04000000, "BufferPin/BufferPin"},
		{19, 0x01000001, "LWLock/unknown (0x01000001)"},
		{19, 0x01000063, "LWLock/ShmemIndex"},
		{18, 0x0A000011, "IO/DataFileExtend"},

		// IO/AioIoCompletion exists in 18 only. [set][pwe]
		{18, 0x0A000000, "IO/AioIoCompletion"},
		{17, 0x0A000000, "IO/BasebackupRead"},
		{16, 0x0A000000, "IO/BaseBackupRead"},
		{15, 0x0A000000, "IO/BaseBackupRead"},

		// 17 spells WAL as "Wal" in IO names; the LWLock keeps "WAL". [set][pwe]
		{16, 0x0A000049, "IO/WALWrite"},
		{17, 0x0A00004C, "IO/WalWrite"},
		{18, 0x0A000050, "IO/WalWrite"},

		// Lock tag types: relation (LOCK TABLE, then SELECT), transactionid
		// (two UPDATEs of one row) and advisory (pg_advisory_lock). [psa]
		{15, 0x03000000, "Lock/relation"},
		{16, 0x03000000, "Lock/relation"},
		{17, 0x03000000, "Lock/relation"},
		{18, 0x03000000, "Lock/relation"},
		{15, 0x03000005, "Lock/transactionid"},
		{16, 0x03000005, "Lock/transactionid"},
		{17, 0x03000005, "Lock/transactionid"},
		{18, 0x03000005, "Lock/transactionid"},
		{15, 0x0300000A, "Lock/advisory"},
		{18, 0x0300000A, "Lock/advisory"},
		// applytransaction is new in 16: 15 shows "???". [set]
		{16, 0x0300000B, "Lock/applytransaction"},
		{15, 0x0300000B, "Lock/unknown (0x0300000b)"},

		// LWLock/WALWrite is individual lock 8 in every version. [set][pwe]
		{15, 0x01000008, "LWLock/WALWrite"},
		{16, 0x01000008, "LWLock/WALWrite"},
		{17, 0x01000008, "LWLock/WALWrite"},
		{18, 0x01000008, "LWLock/WALWrite"},

		// LWLock/BufferMapping moves as locks and tranches are added. [set][pwe]
		{15, 0x0100003C, "LWLock/BufferMapping"},
		{16, 0x0100003C, "LWLock/BufferMapping"},
		{17, 0x01000041, "LWLock/BufferMapping"},
		{18, 0x01000042, "LWLock/BufferMapping"},

		// 11 was XactSLRU until 17 made it a tranche; 10 has been unused
		// since before 15 ("<unassigned:10>" in 15 and 16, NULL later). [set]
		{15, 0x0100000B, "LWLock/XactSLRU"},
		{16, 0x0100000B, "LWLock/XactSLRU"},
		{17, 0x0100000B, "LWLock/unknown (0x0100000b)"},
		{17, 0x0100005A, "LWLock/XactSLRU"},
		{18, 0x0100005C, "LWLock/XactSLRU"},
		{15, 0x0100000A, "LWLock/unknown (0x0100000a)"},
		{18, 0x0100000A, "LWLock/unknown (0x0100000a)"},
		{18, 0x01000035, "LWLock/AioWorkerSubmissionQueue"},
		{17, 0x01000035, "LWLock/XactBuffer"},

		// The last built-in tranche, then the first extension tranche (the
		// server shows "extension" or the name the extension registered). [set]
		{15, 0x0100004A, "LWLock/PgStatsData"},
		{15, 0x0100004B, "LWLock/extension (tranche 75)"},
		{16, 0x0100004C, "LWLock/LogicalRepLauncherHash"},
		{16, 0x0100004D, "LWLock/extension (tranche 77)"},
		{17, 0x0100005B, "LWLock/ParallelVacuumDSA"},
		{17, 0x0100005C, "LWLock/extension (tranche 92)"},
		{17, 0x0100005D, "LWLock/extension (tranche 93)"},
		{18, 0x0100005D, "LWLock/ParallelVacuumDSA"},
		{18, 0x0100005E, "LWLock/AioUringCompletion"},
		{18, 0x0100005F, "LWLock/extension (tranche 95)"},

		// Client/ClientRead: an idle backend. [psa]
		{15, 0x06000000, "Client/ClientRead"},
		{16, 0x06000000, "Client/ClientRead"},
		{17, 0x06000000, "Client/ClientRead"},
		{18, 0x06000000, "Client/ClientRead"},

		// Timeout/PgSleep: SELECT pg_sleep(). [psa]
		{15, 0x09000002, "Timeout/PgSleep"},
		{16, 0x09000002, "Timeout/PgSleep"},
		{17, 0x09000002, "Timeout/PgSleep"},
		{18, 0x09000002, "Timeout/PgSleep"},

		// Activity: the walwriter, autovacuum launcher and io workers. [psa]
		{15, 0x0500000B, "Activity/WalWriterMain"},
		{16, 0x0500000C, "Activity/WalWriterMain"},
		{17, 0x0500000F, "Activity/WalWriterMain"},
		{18, 0x05000011, "Activity/WalWriterMain"},
		{16, 0x05000001, "Activity/AutoVacuumMain"},
		{17, 0x05000001, "Activity/AutovacuumMain"},
		{18, 0x05000006, "Activity/IoWorkerMain"},
		{17, 0x05000006, "Activity/LogicalLauncherMain"},

		// IPC. [set][pwe]
		{15, 0x08000008, "IPC/BufferIO"},
		{16, 0x08000008, "IPC/BufferIO"},
		{17, 0x08000008, "IPC/BufferIo"},
		{18, 0x08000008, "IPC/BufferIo"},
		{15, 0x08000013, "IPC/HashGrowBatchesAllocate"},
		{16, 0x08000013, "IPC/HashGrowBatchesDecide"},

		// BufferPin has one event; Extension events registered at run time
		// (17 and later) are all named "Extension". [set]
		{15, 0x04000000, "BufferPin/BufferPin"},
		{18, 0x04000000, "BufferPin/BufferPin"},
		{15, 0x07000000, "Extension/Extension"},
		{18, 0x07000000, "Extension/Extension"},
		{18, 0x07000003, "Extension/Extension"},
		{14, 0x07000000, "Extension/Extension"},
	} {
		if got := c.code.Name(c.version); got != c.want {
			t.Errorf("WaitEvent(%#08x).Name(%d) = %q, want %q", uint32(c.code), c.version, got, c.want)
		}
	}
}

func TestWaitEventUnknown(t *testing.T) {
	for _, c := range []struct {
		version int
		code    WaitEvent
		want    string
	}{
		{18, 0x0A000051, "IO/unknown (0x0a000051)"},         // one past the last IO event
		{17, 0x0A000011 | 1<<16, "IO/unknown (0x0a010011)"}, // reserved bits set
		{16, 0x09000009, "Timeout/unknown (0x09000009)"},
		{15, 0x05000000 | 0xFFFFFF, "Activity/unknown (0x05ffffff)"},
		{18, 0x01000000, "LWLock/unknown (0x01000000)"},    // tranche 0 is unused
		{18, 0x01010000, "LWLock/unknown (0x01010000)"},    // beyond uint16 tranche ids
		{18, 0x04000001, "BufferPin/unknown (0x04000001)"}, // no such event
		{17, 0x0B000001, "InjectionPoint/unknown (0x0b000001)"},
		{18, 0x02000000, "unknown/unknown (0x02000000)"}, // class 2 is unused
		{18, 0x0C000001, "unknown/unknown (0x0c000001)"},
		{18, 0xFFFFFFFF, "unknown/unknown (0xffffffff)"},
		{18, 0x00000001, "unknown/unknown (0x00000001)"},
		{14, 0x0A000011, "IO/unknown (0x0a000011)"},   // no table for 14
		{20, 0x03000005, "Lock/unknown (0x03000005)"}, // no table for 20
		{0, 0x06000000, "Client/unknown (0x06000000)"},
	} {
		if got := c.code.Name(c.version); got != c.want {
			t.Errorf("WaitEvent(%#08x).Name(%d) = %q, want %q", uint32(c.code), c.version, got, c.want)
		}
	}

	// No code of any class may panic, and each names its class.
	for _, v := range []int{0, 15, 16, 17, 18, 19, 99} {
		for class := range uint32(256) {
			for _, id := range []uint32{0, 1, 2, 0x50, 0x5F, 0x60, 0xFFFF, 0x10000, 0xFFFFFF} {
				w := WaitEvent(class<<24 | id)
				if w == 0 {
					continue
				}
				if name := w.Name(v); !strings.HasPrefix(name, w.classOn(v)+"/") {
					t.Errorf("WaitEvent(%#08x).Name(%d) = %q, class %q", uint32(w), v, name, w.classOn(v))
				}
			}
		}
	}
}

func TestWaitEventZero(t *testing.T) {
	var w WaitEvent
	if got := w.Class(); got != "" {
		t.Errorf("Class() = %q, want \"\"", got)
	}
	for _, v := range []int{15, 16, 17, 18, 0} {
		if got := w.Name(v); got != "" {
			t.Errorf("Name(%d) = %q, want \"\"", v, got)
		}
	}
}

func TestWaitEventClass(t *testing.T) {
	// pgstat_get_wait_event_type of each class on the 18.4 server; 15 and
	// 16 answer "???" for InjectionPoint, which they lack.
	for code, want := range map[WaitEvent]string{
		0x01000008: "LWLock",
		0x03000005: "Lock",
		0x04000000: "BufferPin",
		0x05000000: "Activity",
		0x06000000: "Client",
		0x07000000: "Extension",
		0x08000000: "IPC",
		0x09000000: "Timeout",
		0x0A000000: "IO",
		0x0B000000: "InjectionPoint",
		0x02000000: "unknown",
		0x0C000000: "unknown",
		0xFF000000: "unknown",
	} {
		if got := code.Class(); got != want {
			t.Errorf("WaitEvent(%#08x).Class() = %q, want %q", uint32(code), got, want)
		}
	}
}

func TestWaitEventTables(t *testing.T) {
	// Events per class as the servers have them: 17 and 18 from
	// pg_wait_events (SELECT type, count(*) ... GROUP BY type), 15 and 16
	// by asking pgstat_get_wait_event for each code until it answered
	// "unknown wait event" / "???" / "extension". For LWLock the length is
	// also the first extension tranche id (LWTRANCHE_FIRST_USER_DEFINED).
	counts := map[int]map[string]int{
		15: {"LWLock": 75, "Lock": 11, "BufferPin": 1, "Activity": 12, "Client": 8, "IPC": 51, "Timeout": 8, "IO": 74},
		16: {"LWLock": 77, "Lock": 12, "BufferPin": 1, "Activity": 13, "Client": 8, "IPC": 53, "Timeout": 9, "IO": 75},
		17: {"LWLock": 92, "Lock": 12, "BufferPin": 1, "Activity": 16, "Client": 9, "IPC": 57, "Timeout": 10, "IO": 77},
		18: {"LWLock": 95, "Lock": 12, "BufferPin": 1, "Activity": 18, "Client": 9, "IPC": 57, "Timeout": 10, "IO": 81},
		19: {"LWLock": 100, "Lock": 12, "BufferPin": 4, "Activity": 18, "Client": 9, "IPC": 62, "Timeout": 11, "IO": 83}, // BufferPin: 19's Buffer
	}
	// Every row of pg_wait_events (which lists Extension once).
	pgWaitEvents := map[int]int{17: 264, 18: 273, 19: 287}

	if len(waitEventTables) != len(counts) {
		t.Errorf("%d versions in waitEventTables, %d tested", len(waitEventTables), len(counts))
	}
	for v, table := range waitEventTables {
		named := 1 // Extension
		for class, names := range table {
			className := waitClassNames[class]
			if names == nil {
				continue
			}
			if want := counts[v][className]; len(names) != want {
				t.Errorf("%d %s: %d events, want %d", v, className, len(names), want)
			}
			seen := map[string]int{}
			for id, name := range names {
				if name == "" {
					continue
				}
				named++
				if strings.ContainsAny(name, "/ ") {
					t.Errorf("%d %s/%s: bad name", v, className, name)
				}
				if prev, dup := seen[name]; dup {
					t.Errorf("%d %s/%s: numbered both %d and %d", v, className, name, prev, id)
				}
				seen[name] = id
			}
			if names[len(names)-1] == "" {
				t.Errorf("%d %s: list ends in a gap", v, className)
			}
		}
		if want, ok := pgWaitEvents[v]; ok && named != want {
			t.Errorf("%d: %d named events, pg_wait_events has %d", v, named, want)
		}
	}

	// Shared lists must not have been extended in place.
	if n := len(waitEventTables[15][waitClassLWLock]); n != 75 {
		t.Errorf("15 LWLock: %d events after building 16's", n)
	}
	if n := len(lwlockIndividual17); n != 53 {
		t.Errorf("lwlockIndividual17: %d locks after building 18's", n)
	}
}

// WaitEventCode is Name's inverse: the code of a name on a version.
func TestWaitEventCode(t *testing.T) {
	for _, c := range []struct {
		version int
		name    string
		code    WaitEvent
		ok      bool
	}{
		{18, "IO/AioIoCompletion", 0x0A000000, true},
		{17, "IO/AioIoCompletion", 0, false},
		{15, "Lock/transactionid", 0x03000005, true},
		{18, "IO/DataFileRead", 0x0A000015, true},
		{15, "IO/DataFileRead", 0x0A000011, true},
		{14, "IO/DataFileRead", 0, false},
		{18, "nonsense", 0, false},
	} {
		code, ok := WaitEventCode(c.version, c.name)
		if code != c.code || ok != c.ok {
			t.Errorf("WaitEventCode(%d, %q) = %#x, %v; want %#x, %v", c.version, c.name, code, ok, c.code, c.ok)
		}
		if ok && code.Name(c.version) != c.name {
			t.Errorf("%#x names %q on %d, want %q", code, code.Name(c.version), c.version, c.name)
		}
	}
}
