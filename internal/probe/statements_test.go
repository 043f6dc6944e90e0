package probe

import (
	"testing"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// The statement table as serve reads it: an identity's entries on each
// CPU added up, the table's size and bound; an evicted identity is gone
// from every CPU, the others kept.
func TestStatementsSummedAndEvicted(t *testing.T) {
	testenv.NeedRoot(t)
	tr, err := Open(PGWire, Emit{MinQuery: -1, MinFS: -1, Statements: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	a := StmtKey{Queryid: 11, Instance: 1, Database: 5, Kind: StmtQueryID}
	b := StmtKey{Queryid: 22, Instance: 1, Database: 5, Kind: StmtQueryID}
	put := func(k StmtKey, cpu uint16, calls, ns uint64) {
		k.Cpu = cpu
		v := StmtTotals{Calls: calls, Ns: ns}
		v.Slots[3] = calls
		if err := tr.objs.Stmts.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	put(a, 0, 3, 300)
	put(a, 1, 4, 400)
	put(b, 0, 5, 500)
	table, err := tr.Statements()
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Totals[a]; got == nil || got.Calls != 7 || got.Ns != 700 || got.Slots[3] != 7 {
		t.Errorf("identity a: %+v, want its two CPUs' 7 calls, 700 ns", got)
	}
	if table.Entries != 3 || table.Capacity != int(statementEntries()) || len(table.Totals) != 2 {
		t.Errorf("%d entries of %d, %d identities: want 3 of %d, 2", table.Entries, table.Capacity, len(table.Totals), statementEntries())
	}
	if err := tr.EvictStatements([]StmtKey{a}); err != nil {
		t.Fatal(err)
	}
	if table, err = tr.Statements(); err != nil {
		t.Fatal(err)
	}
	if table.Totals[a] != nil || table.Totals[b] == nil || table.Entries != 1 {
		t.Errorf("after evicting a: %d entries, a %v, b %v", table.Entries, table.Totals[a], table.Totals[b])
	}
}
