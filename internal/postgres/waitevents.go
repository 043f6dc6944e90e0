package postgres

import (
	"fmt"
	"strings"
)

// WaitEvent is a backend's wait_event_info, the uint32 a PostgreSQL
// backend keeps in shared memory (my_wait_event_info points at it) and
// pg_stat_activity turns into wait_event_type and wait_event. The top byte
// is the class; the low bits number the event within the class, and that
// numbering changes between major versions.
type WaitEvent uint32

// Classes, the top byte of a WaitEvent. They have the same numbers in
// every supported version; 2 is unused.
const (
	waitClassLWLock         = 0x01
	waitClassLock           = 0x03
	waitClassBufferPin      = 0x04
	waitClassActivity       = 0x05
	waitClassClient         = 0x06
	waitClassExtension      = 0x07
	waitClassIPC            = 0x08
	waitClassTimeout        = 0x09
	waitClassIO             = 0x0A
	waitClassInjectionPoint = 0x0B // 17 and later
	waitClasses             = 0x0C
)

// waitClassNames are the wait_event_type names.
var waitClassNames = [waitClasses]string{
	waitClassLWLock:         "LWLock",
	waitClassLock:           "Lock",
	waitClassBufferPin:      "BufferPin",
	waitClassActivity:       "Activity",
	waitClassClient:         "Client",
	waitClassExtension:      "Extension",
	waitClassIPC:            "IPC",
	waitClassTimeout:        "Timeout",
	waitClassIO:             "IO",
	waitClassInjectionPoint: "InjectionPoint",
}

func (w WaitEvent) class() uint32 { return uint32(w) >> 24 }

// Class returns the wait_event_type: "" for 0, which means the backend is
// not waiting, and "unknown" for a class no supported version has.
func (w WaitEvent) Class() string {
	if w == 0 {
		return ""
	}
	if c := w.class(); c < waitClasses && waitClassNames[c] != "" {
		return waitClassNames[c]
	}
	return "unknown"
}

// classOn is the wait_event_type as a server of the given major version
// names it: 19 renamed BufferPin to Buffer, when buffer content locks left
// the LWLocks for that class.
func (w WaitEvent) classOn(version int) string {
	if w.class() == waitClassBufferPin && version >= 19 {
		return "Buffer"
	}
	return w.Class()
}

// Name returns wait_event_type and wait_event joined by "/" as a server of
// the given major version (15, 16, ...) shows them in pg_stat_activity,
// e.g. "IO/DataFileRead" or "Lock/transactionid". It returns "" for 0 and
// "Class/unknown (0x…)" for a code or version the tables do not know. An
// extension's LWLock tranche, which only its server can name, is
// "LWLock/extension (tranche 75)": NameOn names it.
func (w WaitEvent) Name(version int) string { return w.NameOn(version, nil) }

// NameOn is Name as a given server shows it: an extension's LWLock tranche
// by the name the extension gave it ("LWLock/pg_stat_statements"), when
// the server's tranches tell it. They are asked for only then (reading
// them costs; nil: not known).
func (w WaitEvent) NameOn(version int, tranches func() Tranches) string {
	if w == 0 {
		return ""
	}
	class, id := w.classOn(version), uint32(w)&0x00FFFFFF
	if w.class() == waitClassExtension {
		// Extensions register named events at run time (17 and later);
		// the names live only in the server's shared memory.
		return class + "/Extension"
	}
	if t, ok := waitEventTables[version]; ok && w.class() < waitClasses {
		names := t[w.class()]
		if id < uint32(len(names)) && names[id] != "" {
			return class + "/" + names[id]
		}
		// Tranche ids after the built-in ones are handed out to extensions
		// at run time, in the order they ask: pg_stat_activity shows the
		// name the extension registered, or "extension".
		if w.class() == waitClassLWLock && id >= uint32(len(names)) && id <= 0xFFFF {
			if tranches != nil {
				if name := tranches()[uint16(id)]; name != "" {
					return class + "/" + name
				}
			}
			return fmt.Sprintf("%s/extension (tranche %d)", class, id)
		}
	}
	return fmt.Sprintf("%s/unknown (0x%08x)", class, uint32(w))
}

// WaitEventCode is the code a server of the given major version uses for
// the wait event name ("IO/AioIoCompletion"); false if it has none.
func WaitEventCode(version int, name string) (WaitEvent, bool) {
	class, event, ok := strings.Cut(name, "/")
	t, known := waitEventTables[version]
	if !ok || !known {
		return 0, false
	}
	for c, names := range t {
		if waitClassNames[c] != class {
			continue
		}
		for id, n := range names {
			if n == event {
				return WaitEvent(uint32(c)<<24 | uint32(id)), true
			}
		}
	}
	return 0, false
}

// waitEventTable holds one major version's event names per class, in
// numbering order: event n of a class is at index n. "" marks a number the
// version does not use.
type waitEventTable [waitClasses][]string

// waitEventTables is every supported major version's table. Adding a
// version is adding its lists here; lists that did not change between
// versions are shared.
var waitEventTables = map[int]*waitEventTable{
	15: {
		waitClassLWLock:    concat(lwlockIndividual15, lwlockTranches15),
		waitClassLock:      lockTags16[:11:11], // no applytransaction yet
		waitClassBufferPin: bufferPin,
		waitClassActivity:  activity15,
		waitClassClient:    client15,
		waitClassIPC:       ipc15,
		waitClassTimeout:   timeout15,
		waitClassIO:        io15,
	},
	16: {
		waitClassLWLock:    concat(lwlockIndividual15, lwlockTranches15, lwlockTranchesAdded16),
		waitClassLock:      lockTags16,
		waitClassBufferPin: bufferPin,
		waitClassActivity:  activity16,
		waitClassClient:    client15,
		waitClassIPC:       ipc16,
		waitClassTimeout:   timeout16,
		waitClassIO:        io16,
	},
	17: {
		waitClassLWLock:    concat(lwlockIndividual17, lwlockTranches17),
		waitClassLock:      lockTags16,
		waitClassBufferPin: bufferPin,
		waitClassActivity:  activity17,
		waitClassClient:    client17,
		waitClassIPC:       ipc17,
		waitClassTimeout:   timeout17,
		waitClassIO:        io17,
	},
	18: {
		waitClassLWLock:    concat(lwlockIndividual17, lwlockIndividualAdded18, lwlockTranches18),
		waitClassLock:      lockTags16,
		waitClassBufferPin: bufferPin,
		waitClassActivity:  activity18,
		waitClassClient:    client17,
		waitClassIPC:       ipc17,
		waitClassTimeout:   timeout17,
		waitClassIO:        io18,
	},
	19: {
		waitClassLWLock:    concat(lwlockIndividual19, lwlockTranches19),
		waitClassLock:      lockTags16,
		waitClassBufferPin: buffer19,
		waitClassActivity:  activity18,
		waitClassClient:    client17,
		waitClassIPC:       ipc19,
		waitClassTimeout:   timeout19,
		waitClassIO:        io19,
	},
}

// concat joins lists into a new slice, so that no shared list is appended
// to in place.
func concat(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}
