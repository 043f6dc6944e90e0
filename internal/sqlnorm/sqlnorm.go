// Package sqlnorm turns query text captured from a database server into a
// normalized text and a stable fingerprint, in the spirit of
// pg_stat_statements and MySQL's statement digests: every constant is
// replaced by a placeholder, so that queries differing only in their
// constants look alike and are counted together, and so that no value a
// client sent (names, e-mail addresses, amounts, ...) leaves the machine in
// dbiolat's output.
//
// A Dialect selects the lexical rules: PostgreSQL (the zero value, and what
// the package-level Normalize, Fingerprint and Of use) or MySQL (MySQL 8 and
// MariaDB 10.11, see mysql.go).
//
// There is no SQL parser here, only a careful single-pass lexer of each
// dialect's lexical rules (see lex.go and mysql.go). That is enough because
// constants are lexical: a string, a number or a dollar-quoted string is
// recognizable without knowing the grammar. What the lexer cannot know (a
// minus sign is unary or binary, a parenthesized list is an IN list) is
// decided from the previous and next tokens.
//
// Normalize, in the PostgreSQL dialect:
//
//   - replaces numbers (1, -5, 1.5e3, .5, 0x1F, 0o17, 0b101, 1_000), strings
//     ('...', E'...', B'...', X'...', N'...', U&'...', $$...$$,
//     $tag$...$tag$) with $1, $2, ... in order of appearance, numbering after
//     the highest $n the query already has;
//   - keeps identifiers, "quoted identifiers", keywords (including NULL,
//     TRUE and FALSE), operators, casts and the query's own $n parameters;
//     a typed literal keeps its type: interval '1 day' becomes interval $1;
//   - removes comments and folds runs of whitespace to one space.
//
// In the MySQL dialect it does the same with MySQL's literals ('...' and
// "..." strings with backslash escapes, N'...', X'...', 0x1F, b'101',
// 0b101, _utf8mb4'...' with its introducer, numbers), MySQL's comments (#,
// "-- ", /* */) and `backtick` identifiers, and writes every constant as ?,
// the placeholder of MySQL's prepared statements and digests, which it
// keeps.
//
// Fingerprint hashes a canonical form in which case, spacing, comments,
// placeholder numbers and the length of IN (...) and ARRAY[...] lists of
// constants no longer matter (in MySQL, nor the number of rows of a
// VALUES list). The normalized text keeps every placeholder of such lists.
//
// All functions accept any input (invalid UTF-8, NUL bytes, unterminated
// quotes and comments, very long text) in linear time and never panic; their
// output is valid UTF-8.
package sqlnorm

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Dialect selects the lexical rules of a database server. The zero value is
// PostgreSQL; values other than PostgreSQL and MySQL behave as PostgreSQL.
type Dialect uint8

const (
	// PostgreSQL follows PostgreSQL 16 with standard_conforming_strings
	// on; constants become $1, $2, ... (see lex.go).
	PostgreSQL Dialect = iota
	// MySQL follows MySQL 8 and MariaDB 10.11 with the default sql_mode
	// (no ANSI_QUOTES, no NO_BACKSLASH_ESCAPES); constants become ?
	// (see mysql.go).
	MySQL
)

// String returns the dialect's name.
func (d Dialect) String() string {
	if d == MySQL {
		return "MySQL"
	}
	return "PostgreSQL"
}

// lex splits s into tokens by the dialect's rules.
func (d Dialect) lex(s string) []token {
	if d == MySQL {
		return lexMySQL(s)
	}
	return lex(s)
}

// Normalize replaces every literal in a query with a placeholder and folds
// whitespace, by the dialect's rules: see the package-level Normalize for
// PostgreSQL and mysql.go for MySQL, where every constant becomes ? and the
// query's own ? placeholders are kept. Normalize is idempotent.
func (d Dialect) Normalize(query string) string {
	s := toValidUTF8(query)
	return normalize(d, s, d.lex(s))
}

// Fingerprint is a stable 64-bit identifier of the normalized query in the
// dialect: see the package-level Fingerprint. In MySQL the canonical form
// writes constants and ? placeholders "?", lowercases unquoted words, writes
// a `backtick` identifier made only of identifier characters as the bare
// lowercased name (so `Id` and id agree), and keeps only the first of the
// rows of a VALUES list when the others have the same tokens, constants
// aside, so that multi-row inserts share a fingerprint whatever their row
// count. Fingerprint(q) == Fingerprint(Normalize(q)) in each dialect.
func (d Dialect) Fingerprint(normalized string) uint64 {
	return fnv1a64(d.canonical(normalized))
}

// Of returns d.Normalize(query) and its d.Fingerprint, lexing once.
func (d Dialect) Of(query string) (normalized string, fingerprint uint64) {
	s := toValidUTF8(query)
	toks := d.lex(s)
	normalized = normalize(d, s, toks)
	return normalized, fnv1a64(canonicalTokens(d, s, toks))
}

// Normalize replaces every literal in a PostgreSQL query with $n and folds
// whitespace, so that queries differing only in their constants look alike.
//
// Constants are numbered $1, $2, ... in order of appearance, after the
// highest $n parameter already in the query (as pg_stat_statements does), so
// "SELECT $1, 5" becomes "SELECT $1, $2". Comments are removed, whitespace
// runs become one space and the ends are trimmed; semicolons, and any
// statements after them, are kept. An unterminated constant is replaced up to
// the end of the input. Normalize is idempotent:
// Normalize(Normalize(q)) == Normalize(q).
func Normalize(query string) string { return PostgreSQL.Normalize(query) }

// normalize builds Normalize's result from the query's tokens in dialect d.
func normalize(d Dialect, s string, toks []token) string {
	mysql := d == MySQL
	var next int64
	if !mysql {
		next = maxParam(s, toks) + 1
	}
	out := make([]byte, 0, len(s)+16)
	var space, comment, lastLiteral bool
	for _, t := range toks {
		switch t.kind {
		case kSpace:
			space = true
			continue
		case kComment:
			comment = true
			continue
		}
		lit := t.isLiteral()
		var first byte
		switch {
		case lit && mysql:
			first = '?'
		case lit:
			first = '$'
		default:
			first = s[t.start]
		}
		if len(out) > 0 {
			last := out[len(out)-1]
			// A comment is whitespace: removing it must not glue its
			// neighbours into another token ("a/**/b", "-/**/-"), so it
			// leaves a space unless a neighbour is a one-byte token that
			// cannot combine with anything. A placeholder must not glue
			// to a neighbour either: "interval'1 day'" becomes
			// "interval $1", not the identifier "interval$1", and a
			// placeholder followed by a digit or a letter keeps a space.
			// In MySQL, two minus signs never touch ("--" followed by a
			// space is a comment there), and two ? stay apart for
			// legibility.
			sep := space ||
				comment && !selfDelimiting(last) && !selfDelimiting(first) ||
				lit && isIdentCont(last) ||
				lastLiteral && isIdentCont(first) ||
				mysql && (last == '-' && first == '-' || last == '?' && first == '?')
			if sep {
				out = append(out, ' ')
			}
		}
		switch {
		case lit && mysql:
			out = append(out, '?')
		case lit:
			out = append(out, '$')
			out = strconv.AppendInt(out, next, 10)
			next++
		default:
			out = append(out, s[t.start:t.end]...)
		}
		space, comment, lastLiteral = false, false, lit
	}
	return string(out)
}

// Fingerprint is a stable 64-bit identifier of the normalized query (same
// query shape → same value, across runs and machines): the FNV-1a 64 hash of
// a canonical form of the query.
//
// The canonical form is the sequence of the query's tokens, comments
// removed, separated by single spaces, where unquoted identifiers and
// keywords are lowercased (ASCII only, as PostgreSQL folds them), every
// constant and every $n parameter is written "$" (so placeholder numbering
// does not matter), the list of an IN (...) or ARRAY[...] made only of
// constants and parameters is written "$..." whatever its length, and
// trailing semicolons are dropped. So "IN (1, 2)" and "IN (1, 2, 3)" share a
// fingerprint while "VALUES ($1)" and "VALUES ($1, $2)" or "f($1)" and
// "f($1, $2)" do not. Fingerprint accepts raw query text too:
// Fingerprint(q) == Fingerprint(Normalize(q)).
func Fingerprint(normalized string) uint64 { return PostgreSQL.Fingerprint(normalized) }

// Of returns Normalize(query) and its Fingerprint, the common case. It lexes
// once: the fingerprint of a query equals that of its normalized form.
func Of(query string) (normalized string, fingerprint uint64) { return PostgreSQL.Of(query) }

// canonical returns the canonical form of a PostgreSQL query that
// Fingerprint hashes.
func canonical(query string) []byte { return PostgreSQL.canonical(query) }

// canonical returns the canonical form of a query that d.Fingerprint
// hashes.
func (d Dialect) canonical(query string) []byte {
	s := toValidUTF8(query)
	return canonicalTokens(d, s, d.lex(s))
}

// canonicalTokens builds the canonical form from the query's tokens in
// dialect d. It filters toks in place.
func canonicalTokens(d Dialect, s string, all []token) []byte {
	toks := all[:0] // significant tokens, reusing the storage
	for _, t := range all {
		if t.kind != kSpace && t.kind != kComment {
			toks = append(toks, t)
		}
	}
	for len(toks) > 0 && isPunct(s, toks[len(toks)-1], ";") {
		toks = toks[:len(toks)-1]
	}

	mysql := d == MySQL
	constant, list := "$", "$..."
	if mysql {
		constant, list = "?", "?..."
	}
	var parens []int // MySQL: indexes of the open parentheses
	out := make([]byte, 0, len(s))
	emit := func(text string) {
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, text...)
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.isLiteral() || t.kind == kParam:
			emit(constant)
			continue
		case t.kind == kIdent || t.kind == kQIdent && mysql:
			emit(canonicalName(d, s, t))
			continue
		}
		text := s[t.start:t.end]
		// IN (c, c, ...) and ARRAY[c, c, ...]: the list's length is not
		// part of the shape. The look-ahead only crosses placeholders and
		// commas, which are then skipped or visited once more, so the
		// whole loop stays linear.
		if i > 0 && toks[i-1].kind == kIdent && (text == "(" || text == "[") {
			prev := lowerASCII(s[toks[i-1].start:toks[i-1].end])
			closer := ""
			if text == "(" && prev == "in" {
				closer = ")"
			} else if text == "[" && prev == "array" {
				closer = "]"
			}
			if closer != "" {
				if end := constantList(s, toks, i+1, closer); end > 0 {
					emit(text)
					emit(list)
					emit(closer)
					i = end
					continue
				}
			}
		}
		emit(text)
		if !mysql {
			continue
		}
		// MySQL: VALUES (...), (...), ...: the number of rows is not part
		// of the shape. IN lists above are skipped whole, with their
		// parentheses, and so are the rows skipped here.
		switch text {
		case "(":
			parens = append(parens, i)
		case ")":
			if len(parens) > 0 {
				open := parens[len(parens)-1]
				parens = parens[:len(parens)-1]
				i = sameRows(s, toks, open, i)
			}
		}
	}
	return out
}

// constantList reports whether toks[i:] starts with a list of constants or
// parameters separated by commas and closed by closer; if so it returns the
// index of the closer, otherwise 0.
func constantList(s string, toks []token, i int, closer string) int {
	for i < len(toks) && (toks[i].isLiteral() || toks[i].kind == kParam) {
		i++
		if i < len(toks) && isPunct(s, toks[i], ",") {
			i++
			continue
		}
		if i < len(toks) && isPunct(s, toks[i], closer) {
			return i
		}
		return 0
	}
	return 0
}

// isPunct reports whether t is the punctuation p.
func isPunct(s string, t token, p string) bool {
	return t.kind == kPunct && s[t.start:t.end] == p
}

// selfDelimiting reports whether c is a one-byte token that never combines
// with a neighbouring byte into another token.
func selfDelimiting(c byte) bool {
	switch c {
	case '(', ')', '[', ']', ',', ';':
		return true
	}
	return false
}

// maxParam returns the highest $n parameter number in the query, or 0.
// Numbers saturate at the largest int32, PostgreSQL's own limit.
func maxParam(s string, toks []token) int64 {
	const limit = 1<<31 - 1
	var max int64
	for _, t := range toks {
		if t.kind != kParam {
			continue
		}
		var v int64
		for _, c := range []byte(s[t.start+1 : t.end]) {
			v = v*10 + int64(c-'0')
			if v > limit {
				v = limit
				break
			}
		}
		if v > max {
			max = v
		}
	}
	return max
}

// toValidUTF8 replaces each run of invalid UTF-8 bytes by U+FFFD.
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// fnv1a64 is the 64-bit FNV-1a hash of b.
func fnv1a64(b []byte) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	return h
}
