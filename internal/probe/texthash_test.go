package probe

import (
	"encoding/binary"
	"math/rand"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/dbiolat/dbiolat/internal/testenv"
)

// textHash is the statement text identity of sock.bpf.h's stmt_text, byte
// by byte as its comment states it: the reference its faster form (a
// callback per stride of bytes) must equal on every text.
func textHash(buf []byte, length, off, end, skip uint32) uint64 {
	const offset, prime = 0xcbf29ce484222325, 0x100000001b3
	h := uint64(offset)
	last := min(end, length)
	var quote, word, space, done bool
	i := off
	for n := 0; n < int(dbiolatStmtSizeSTMT_TEXT_HASHED)+64; n++ {
		if i >= last {
			done = true
			break
		}
		c := buf[i&(uint32(len(buf))-1)]
		i++
		if skip > 0 {
			if c == 0 {
				skip--
			}
			continue
		}
		if c == 0 {
			done = true
			break
		}
		if quote {
			quote = c != '\''
			continue
		}
		switch {
		case c == '\'':
			quote = true
			c = '?'
		case c >= '0' && c <= '9' && !word:
			continue
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			space, word = true, false
			continue
		}
		if space {
			h = (h ^ ' ') * prime
		}
		space = false
		word = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
		h = (h ^ uint64(c)) * prime
	}
	if !done {
		h = (h ^ uint64(end-off)) * prime
	}
	return h | 1
}

// The kernel's statement text hash (stmt_text) equals its reference on
// texts around its stride and its limit, with literals, quotes, names to
// skip and odd bytes; and texts that differ only in their literals are
// one identity, texts that differ in a name are two.
func TestStmtTextMatchesReference(t *testing.T) {
	testenv.NeedRoot(t)
	s, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	var objs struct {
		Prog    *ebpf.Program `ebpf:"selftest_stmt_text"`
		Capture *ebpf.Map     `ebpf:"selftest_capture"`
	}
	if err := s.LoadAndAssign(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Prog.Close()
	defer objs.Capture.Close()
	prog := objs.Prog
	const textMax = len(dbiolatCapture{}.Buf)
	kernel := func(text string, off, end, skip uint32) uint64 {
		in := make([]byte, 24+textMax)
		binary.LittleEndian.PutUint32(in[0:], off)
		binary.LittleEndian.PutUint32(in[4:], end)
		binary.LittleEndian.PutUint32(in[8:], skip)
		binary.LittleEndian.PutUint32(in[12:], uint32(min(len(text), textMax)))
		copy(in[24:], text)
		out := make([]byte, len(in))
		ret, err := prog.Run(&ebpf.RunOptions{Context: in, ContextOut: out})
		if err != nil || ret != 0 {
			t.Fatalf("selftest_stmt_text: %d, %v", ret, err)
		}
		return binary.LittleEndian.Uint64(out[16:])
	}
	check := func(text string, off, end, skip uint32) uint64 {
		buf := make([]byte, textMax)
		copy(buf, text)
		got, want := kernel(text, off, end, skip), textHash(buf, uint32(min(len(text), textMax)), off, end, skip)
		if got != want {
			t.Errorf("%q [%d, %d) skip %d: kernel %#x, reference %#x", text, off, end, skip, got, want)
		}
		return got
	}
	whole := func(text string) uint64 { return check(text, 0, uint32(len(text)), 0) }

	texts := []string{"", "S", "SELECT 1", "SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
		"select 'it''s', \"x1\" ,\t\n 42 from t2", "name\x00SELECT $1", "a\x00b\x00SELECT 7", "\xc3\xa9t\xc3\xa9 = 3",
		strings.Repeat("x", 575), strings.Repeat("x", 576), strings.Repeat("x", 577), strings.Repeat("ab 12 ", 200)}
	r := rand.New(rand.NewSource(1))
	alphabet := "ab_$Z09 '\t\n\r,;()\x00\x80"
	for n := 0; n < 200; n++ {
		b := make([]byte, r.Intn(40)+r.Intn(2)*600)
		for i := range b {
			b[i] = alphabet[r.Intn(len(alphabet))]
		}
		texts = append(texts, string(b))
	}
	for _, text := range texts {
		whole(text)
		for _, skip := range []uint32{0, 1, 2} {
			for _, off := range []uint32{0, 1, 3, 8, 9} {
				check(text, off, uint32(len(text)), skip)
				check(text, off, uint32(len(text))+5, skip) // past the capture: its length ends it
			}
		}
	}
	if whole("SELECT * FROM t WHERE a = 1 AND b = 'x'") != whole("SELECT  *\nFROM t WHERE a = 12345 AND b = 'yz'") {
		t.Error("two texts that differ in their literals and white space are two identities")
	}
	if whole("SELECT a1 FROM t") == whole("SELECT a2 FROM t") {
		t.Error("two texts that differ in a name are one identity")
	}
}
