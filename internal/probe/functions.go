package probe

// Uprobes on functions of a database's binary or of the libraries it maps,
// by name: its asynchronous I/O handoff, its TLS library's plaintext; an
// entry's probe where it costs least (entry.go).

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AIOFunctions names the functions of a database's asynchronous I/O
// handoff, each called with the I/O's handle (aio.bpf.c): PostgreSQL 18's
// pgaio_io_stage, pgaio_io_perform_synchronously and
// pgaio_io_process_completion, the handle their first argument, the same
// address in every process of the instance; or, InnoDB set, MySQL's
// fil_io and SyncFileIO::execute, the handle a page's frame.
type AIOFunctions struct {
	Stage    string // in the process or thread that wants the read
	Perform  string // in the one that does it
	Complete string // there too, the result (bytes or -errno) its second argument; "" with InnoDB (Perform's return)
	InnoDB   bool
}

// ErrNoFunction says a binary lacks a function to attach to (an older
// version, or a stripped build).
var ErrNoFunction = errors.New("function missing")

// AttachAIO follows reads other processes perform for a query
// (aio.bpf.c) in every process running the binary, now and later; a
// binary already attached is skipped.
func (t *Tracer) AttachAIO(binary string, f AIOFunctions) error {
	key, err := attachment(binary, "aio")
	if err != nil || t.binaries[key] {
		return err
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return fmt.Errorf("opening %s: %w", binary, err)
	}
	o := &t.objs
	type step struct {
		symbol string
		prog   *ebpf.Program
		at     probeAt
	}
	steps := []step{{f.Stage, o.AioStage, entry}, {f.Perform, o.AioPerform, entry}, {f.Complete, o.AioComplete, entry}}
	if f.InnoDB {
		steps = []step{{f.Stage, o.AioInnodbStage, entry}, {f.Perform, o.AioInnodbPerform, entryWithReturn},
			{f.Perform, o.AioInnodbPerformed, atReturn}}
	}
	for _, s := range steps {
		if err := t.attachFunction(ex, binary, s.symbol, s.prog, s.at, 0); err != nil {
			return err
		}
	}
	t.binaries[key] = true
	return nil
}

// WaitFunctions names a database's wait brackets: begin(thread, int type)
// and end(thread), called by the thread that waits (MySQL's and
// MariaDB's thd_wait_begin and thd_wait_end).
type WaitFunctions struct {
	Begin, End string
}

// AttachWaits names and boxes the waits a database brackets (lock.bpf.c),
// in every process running the binary; a binary already attached is
// skipped.
func (t *Tracer) AttachWaits(binary string, f WaitFunctions) error {
	key, err := attachment(binary, "waits")
	if err != nil || t.binaries[key] {
		return err
	}
	ex, err := link.OpenExecutable(binary)
	if err != nil {
		return fmt.Errorf("opening %s: %w", binary, err)
	}
	for _, fn := range []struct {
		symbol string
		prog   *ebpf.Program
	}{{f.Begin, t.objs.LockThdWaitBegin}, {f.End, t.objs.LockThdWaitEnd}} {
		if err := t.attachFunction(ex, binary, fn.symbol, fn.prog, entry, 0); err != nil {
			return err
		}
	}
	t.binaries[key] = true
	return nil
}

// TLSFunctions names a TLS library (the start of its file's name) and its
// plaintext read and write, both int f(session, void *buf, int num).
type TLSFunctions struct {
	Library, Read, Write string
}

// OpenSSL is the TLS library PostgreSQL and MySQL servers link (Debian's:
// libssl.so.3).
var OpenSSL = TLSFunctions{Library: "libssl.so", Read: "SSL_read", Write: "SSL_write"}

// AttachTLS reads a protocol family's TLS connections in plaintext at
// the library, in every process that maps it: the family's programs
// <prefix>tls_read, tls_read_done and tls_write (pgwire.bpf.c,
// mysql_tls.bpf.h). A process reads its TLS connections this way once
// tracked with ProcInfo.TLSProbed. Families may share a library: each
// one's programs ignore the others' threads.
func (t *Tracer) AttachTLS(protocol Families, library string, f TLSFunctions) error {
	var prefix string
	for _, fam := range families {
		if fam.f == protocol {
			prefix = fam.prefix
		}
	}
	progs := byName[*ebpf.Program](&t.objs.dbiolatPrograms)
	read, readDone, write := progs[prefix+"tls_read"], progs[prefix+"tls_read_done"], progs[prefix+"tls_write"]
	if prefix == "" || read == nil || readDone == nil || write == nil {
		return fmt.Errorf("the %s family has no TLS programs", protocol.Names())
	}
	return t.attachTLS(library, prefix+"tls", f, read, readDone, write)
}

// attachTLS attaches read at the read function's entry, readDone at its
// return and write at the write function's entry, once per library and kind.
func (t *Tracer) attachTLS(library, kind string, f TLSFunctions, read, readDone, write *ebpf.Program) error {
	key, err := attachment(library, kind)
	if err != nil || t.binaries[key] {
		return err
	}
	ex, err := link.OpenExecutable(library)
	if err != nil {
		return fmt.Errorf("opening %s: %w", library, err)
	}
	for _, fn := range []struct {
		symbol string
		prog   *ebpf.Program
		at     probeAt
	}{{f.Read, read, entryWithReturn}, {f.Read, readDone, atReturn}, {f.Write, write, entry}} {
		if err := t.attachFunction(ex, library, fn.symbol, fn.prog, fn.at, 0); err != nil {
			return err
		}
	}
	t.binaries[key] = true
	return nil
}

// probeAt is where on a function a program is attached.
type probeAt int

const (
	entry           probeAt = iota // its entry, moved past instructions that need a single step (entry.go)
	entryWithReturn                // its entry, where its return is probed too: moved only if the return is at a site
	atReturn                       // its return: at its site (entry.go: returnSite) if it has one, else a return probe
)

// attachFunction attaches prog at a function's entry, or its return, in
// process pid alone, or in every process that maps file when pid is 0.
func (t *Tracer) attachFunction(ex *link.Executable, file, symbol string, prog *ebpf.Program, at probeAt, pid int) error {
	var off uint64
	switch at {
	case entry:
		off = entryProbeOffset(file, symbol)
	case entryWithReturn: // else the return probe's breakpoint is on the first instruction: shared
		if returnProbeOffset(file, symbol) != 0 {
			off = entryProbeOffset(file, symbol)
		}
	case atReturn:
		if off = returnProbeOffset(file, symbol); off != 0 {
			at = entry // a probe like an entry's, where the return value is in place
		}
	}
	err := t.attach(prog, false, func() (link.Link, error) {
		switch {
		case t.uprobeMulti && at == atReturn:
			return ex.UretprobeMulti([]string{symbol}, prog, &link.UprobeMultiOptions{PID: uint32(pid)})
		case t.uprobeMulti:
			return ex.UprobeMulti([]string{symbol}, prog, &link.UprobeMultiOptions{PID: uint32(pid), Offsets: []uint64{off}})
		case at == atReturn:
			return ex.Uretprobe(symbol, prog, &link.UprobeOptions{PID: pid})
		}
		return ex.Uprobe(symbol, prog, &link.UprobeOptions{PID: pid, Offset: off})
	})
	if errors.Is(err, link.ErrNoSymbol) {
		return fmt.Errorf("%s has no function %s: %w", file, symbol, ErrNoFunction)
	}
	if err != nil {
		return fmt.Errorf("attaching to %s in %s: %w", symbol, file, err)
	}
	return nil
}
