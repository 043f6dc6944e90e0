package probe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AIOFunctions names the functions of a database's asynchronous I/O
// handoff (PostgreSQL 18: pgaio_io_stage, pgaio_io_perform_synchronously,
// pgaio_io_process_completion). Each takes the I/O's handle, at the same
// address in every process of the instance, as its first argument.
type AIOFunctions struct {
	Stage    string // in the process that wants the read
	Perform  string // in the process that does it
	Complete string // there too, the result (bytes or -errno) its second argument
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
	for _, fn := range []struct {
		symbol string
		prog   *ebpf.Program
	}{{f.Stage, o.AioStage}, {f.Perform, o.AioPerform}, {f.Complete, o.AioComplete}} {
		var l link.Link
		if t.uprobeMulti {
			l, err = ex.UprobeMulti([]string{fn.symbol}, fn.prog, nil)
		} else {
			l, err = ex.Uprobe(fn.symbol, fn.prog, nil)
		}
		if errors.Is(err, link.ErrNoSymbol) {
			return fmt.Errorf("%s has no function %s: %w", binary, fn.symbol, ErrNoFunction)
		}
		if err != nil {
			return fmt.Errorf("attaching to %s in %s: %w", fn.symbol, binary, err)
		}
		t.add(l, fn.prog)
	}
	t.binaries[key] = true
	return nil
}
