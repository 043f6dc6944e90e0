package sqlnorm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are queries exercising every lexical rule, used as the seed
// corpus of the fuzz tests.
var fuzzSeeds = []string{
	"",
	"SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
	"UPDATE pgbench_accounts SET abalance = abalance + -4270 WHERE aid = 80310;",
	"INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (6, 1, 13307, -4270, CURRENT_TIMESTAMP);",
	"BEGIN; SELECT 1; COMMIT",
	"SELECT 1e10, 1.5E-3, .5e+2, 0x1F, 0o17, 0b101, 1_000, 123abc, a[1..10], 1.2.3",
	"SELECT a=-5, a+-5, a - -5, a-5, (a)-5, f(-1), a[1:-1], a @-5, !=-5",
	`SELECT 'it''s', E'a\'b\\', B'101', X'1F', N'x', U&'d\0061t' UESCAPE '!', foo'bar'`,
	"SELECT 'foo'\n'bar', 'a' -- c\n 'b', 'x' 'y'",
	"SELECT $$it's$$, $fn$ a $$ b $fn$, $a$ $ab$ $a$, x$$y, $ 1, $'x', $abc",
	"SELECT interval '1 day', '{1,2}'::int[], DATE '2024-01-01', CAST('5' AS int)",
	"WHERE id IN (1, 2, 3) AND b NOT IN ('a') AND c = ANY(ARRAY[1,2])",
	`SELECT NULL, TRUE, "it's", "a""b", U&"d\0061t", a$1, été`,
	"SELECT $1, 5, $3, $007, $99999999999999999999",
	"SELECT /* a /* b */ c */ 1 -- x\n, a/**/b, -/**/-, \"a\"/**/\"b\", $1/**/2",
	"SELECT 'unterminated",
	"SELECT E'unterminated\\",
	"SELECT $q$ unterminated",
	"SELECT 1 /* unterminated",
	`SELECT "unterminated`,
	"SELECT \xff\xfe 'a\xff' \x00 \v\f\r\n",
	"+-+-+-5 ||/-5 <->-5 ~-5",
	"SELECT 'a'||'b', $1$2, $1$a$x$a$, 1'x', e/**/'x'",
}

// FuzzNormalize checks, for any input, that Normalize and Fingerprint do
// not panic, that the output is valid UTF-8 without comments, that Normalize
// is idempotent (its output has no constant left to replace, comments nor
// whitespace runs, and re-lexes into the same tokens), and that Fingerprint
// gives the same value for a query and its normalization.
func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, fp := Of(q)
		if !utf8.ValidString(n) {
			t.Fatalf("Normalize(%q) = %q: invalid UTF-8", q, n)
		}
		if again := Normalize(n); again != n {
			t.Fatalf("Normalize not idempotent:\n  q  %q\n  n  %q\n  nn %q", q, n, again)
		}
		toks := lex(n)
		if len(toks) > 0 && (toks[0].kind == kSpace || toks[len(toks)-1].kind == kSpace) {
			t.Fatalf("Normalize(%q) = %q: not trimmed", q, n)
		}
		for _, tok := range toks {
			switch tok.kind {
			case kComment:
				t.Fatalf("Normalize(%q) = %q keeps a comment", q, n)
			case kSpace:
				if n[tok.start:tok.end] != " " {
					t.Fatalf("Normalize(%q) = %q keeps whitespace %q", q, n, n[tok.start:tok.end])
				}
			case kString, kNumber:
				t.Fatalf("Normalize(%q) = %q keeps constant %q", q, n, n[tok.start:tok.end])
			}
		}
		if raw := Fingerprint(q); raw != fp {
			t.Fatalf("Fingerprint(%q) = %x != Fingerprint(Normalize) = %x\n  n %q\n  canonical %q\n  vs        %q",
				q, raw, fp, n, canonical(q), canonical(n))
		}
	})
}

// FuzzLiteralPrivacy puts arbitrary text inside each form of string
// constant and checks that nothing of it survives: the output is exactly the
// query with a placeholder, also when the constant is cut before its
// closing quote.
func FuzzLiteralPrivacy(f *testing.F) {
	for _, s := range []string{"", "x", "it's", `a\b\'`, "$$", "$q$", "--", "/*", "\n'", "\xff\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, secret string) {
		doubled := strings.ReplaceAll(secret, "'", "''")
		type form struct{ open, body, close, want string }
		forms := []form{
			{"'", doubled, "'", "$1"},
			{"E'", strings.ReplaceAll(strings.ReplaceAll(secret, `\`, `\\`), "'", `\'`), "'", "$1"},
			{"B'", doubled, "'", "$1"},
			{"X'", doubled, "'", "$1"},
			{"N'", doubled, "'", "$1"},
			{"U&'", doubled, "'", "$1"},
			{"interval '", doubled, "'", "interval $1"},
			{"'", doubled, "'::text[]", "$1::text[]"},
		}
		// A dollar quote cannot contain its own delimiter, nor end with
		// a prefix of it.
		if !strings.Contains(secret+"$", "$q$") {
			forms = append(forms, form{"$q$", secret, "$q$", "$1"})
		}
		if !strings.Contains("$"+secret+"$", "$$") {
			forms = append(forms, form{"$$", secret, "$$", "$1"})
		}
		for _, fm := range forms {
			q := "SELECT * FROM t WHERE a = " + fm.open + fm.body + fm.close + " AND b = c"
			want := "SELECT * FROM t WHERE a = " + fm.want + " AND b = c"
			if got := Normalize(q); got != want {
				t.Errorf("Normalize(%q) = %q, want %q", q, got, want)
			}
			q = "SELECT * FROM t WHERE a = " + fm.open + fm.body
			want = "SELECT * FROM t WHERE a = " + strings.TrimSuffix(fm.want, "::text[]")
			if got := Normalize(q); got != want {
				t.Errorf("Normalize(%q) = %q, want %q", q, got, want)
			}
		}
	})
}
