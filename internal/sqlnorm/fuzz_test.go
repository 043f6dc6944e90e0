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

	// MySQL's rules.
	"SELECT c FROM sbtest1 WHERE id=?",
	"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 7, '683', '677'), (?, ?, ?, ?)",
	"SELECT `a``b`, `c` FROM `t` # x\n WHERE a -- y\n = 1 /* z */ AND b IN (1, ?, 'x')",
	`SELECT 'it\'s', "a""b", 'a' 'b', N'x' 'y', X'1F', b'101', 0x1F, 0b101, 0X1F, 0b12, 1_000, 123abc`,
	"SELECT _utf8mb4'x', _binary 'x', _latin1 X'41', _binary 0x41, _id 'alias', _utf8mb4",
	"SELECT 1--1, a--b, --c, a---5, a--/**/5, 1-- x\n, a=-5, INTERVAL -1 DAY, 1.5e, 1e5abc, t.5, 1.2.3",
	"/*!40101 SET @a=@@b */; /*M!100500 SELECT 1 */ /*+ hint */ /*! a /* b */ c */ 2*/3 /*!123 x",
	"SELECT @a, @a.b, @'q', @`q`, @@global.x, @@1x, 'u'@'h', u@localhost, @",
	"VALUES ROW(1), ROW(2); INSERT INTO t VALUES (1, NOW()), (2, NOW()) ON DUPLICATE KEY UPDATE a = VALUES(a)",
	"SELECT ??, ?5, a->'$.x', a->>'$.y', a <=> b, a := 1, `unterminated",
	`SELECT 'x\`,
	"SELECT -- \r'secret'\n1, #\x00\n 2, --\x01x",
}

// FuzzNormalize checks, for any input and in each dialect, that Normalize
// and Fingerprint do not panic, that the output is valid UTF-8 without
// comments, that Normalize is idempotent (its output has no constant left to
// replace, comments nor whitespace runs, and re-lexes into the same tokens),
// and that Fingerprint gives the same value for a query and its
// normalization.
func FuzzNormalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		checkNormalize(t, PostgreSQL, q)
		checkNormalize(t, MySQL, q)
	})
}

// checkNormalize checks FuzzNormalize's properties of q in dialect d.
func checkNormalize(t *testing.T, d Dialect, q string) {
	t.Helper()
	n, fp := d.Of(q)
	if !utf8.ValidString(n) {
		t.Fatalf("%v: Normalize(%q) = %q: invalid UTF-8", d, q, n)
	}
	if again := d.Normalize(n); again != n {
		t.Fatalf("%v: Normalize not idempotent:\n  q  %q\n  n  %q\n  nn %q", d, q, n, again)
	}
	toks := d.lex(n)
	if len(toks) > 0 && (toks[0].kind == kSpace || toks[len(toks)-1].kind == kSpace) {
		t.Fatalf("%v: Normalize(%q) = %q: not trimmed", d, q, n)
	}
	for _, tok := range toks {
		switch tok.kind {
		case kComment:
			t.Fatalf("%v: Normalize(%q) = %q keeps a comment", d, q, n)
		case kSpace:
			if n[tok.start:tok.end] != " " {
				t.Fatalf("%v: Normalize(%q) = %q keeps whitespace %q", d, q, n, n[tok.start:tok.end])
			}
		case kString, kNumber:
			t.Fatalf("%v: Normalize(%q) = %q keeps constant %q", d, q, n, n[tok.start:tok.end])
		}
	}
	if raw := d.Fingerprint(q); raw != fp {
		t.Fatalf("%v: Fingerprint(%q) = %x != Fingerprint(Normalize) = %x\n  n %q\n  canonical %q\n  vs        %q",
			d, q, raw, fp, n, d.canonical(q), d.canonical(n))
	}
}

// FuzzLiteralPrivacy puts arbitrary text inside each form of string
// constant of each dialect, and in MySQL's comments, and checks that nothing
// of it survives: the output is exactly the query with a placeholder, also
// when the constant is cut before its closing quote.
func FuzzLiteralPrivacy(f *testing.F) {
	for _, s := range []string{"", "x", "it's", `a\b\'`, "$$", "$q$", "--", "/*", "\n'", "\xff\x00", "é",
		`"`, "`", "#", "*/", "!", `\`, "' '", "\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, secret string) {
		type form struct{ open, body, close, want string }
		check := func(d Dialect, forms []form) {
			for _, fm := range forms {
				q := "SELECT * FROM t WHERE a = " + fm.open + fm.body + fm.close + " AND b = c"
				want := "SELECT * FROM t WHERE a = " + fm.want + " AND b = c"
				if got := d.Normalize(q); got != want {
					t.Errorf("%v: Normalize(%q) = %q, want %q", d, q, got, want)
				}
				q = "SELECT * FROM t WHERE a = " + fm.open + fm.body
				want = "SELECT * FROM t WHERE a = " + strings.TrimSuffix(fm.want, "::text[]")
				if got := d.Normalize(q); got != want {
					t.Errorf("%v: Normalize(%q) = %q, want %q", d, q, got, want)
				}
			}
		}

		doubled := strings.ReplaceAll(secret, "'", "''")
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
		check(PostgreSQL, forms)

		// MySQL: backslash escapes in every string but hexadecimal and
		// bit strings, which have none.
		backslashes := strings.ReplaceAll(secret, `\`, `\\`)
		escaped := func(quote string) string { return strings.ReplaceAll(backslashes, quote, `\`+quote) }
		forms = []form{
			{"'", escaped("'"), "'", "?"},
			{"'", strings.ReplaceAll(backslashes, "'", "''"), "'", "?"},
			{`"`, escaped(`"`), `"`, "?"},
			{`"`, strings.ReplaceAll(backslashes, `"`, `""`), `"`, "?"},
			{"N'", escaped("'"), "'", "?"},
			{"'x' '", escaped("'"), "'", "?"},
			{"_utf8mb4'", escaped("'"), "'", "?"},
			{"_binary \n'", escaped("'"), "'", "?"},
			{"X'", doubled, "'", "?"},
			{"b'", doubled, "'", "?"},
			{"DATE '", escaped("'"), "'", "DATE ?"},
			{"/*!40101 '", escaped("'"), "' */", "?"},
		}
		// Comments, which cannot contain their own end.
		if !strings.Contains(secret, "*/") {
			forms = append(forms, form{"? /* ", secret, " */", "?"})
		}
		if !strings.Contains(secret, "\n") {
			forms = append(forms, form{"? #", secret, "\n", "?"}, form{"? -- ", secret, "\n", "?"})
		}
		check(MySQL, forms)
	})
}
