// Package sqlnorm turns query text captured from PostgreSQL into a
// normalized text and a stable fingerprint, in the spirit of
// pg_stat_statements: every constant is replaced by a $n placeholder, so
// that queries differing only in their constants look alike and are counted
// together, and so that no value a client sent (names, e-mail addresses,
// amounts, ...) leaves the machine in dbiolat's output.
//
// There is no SQL parser here, only a careful single-pass lexer of
// PostgreSQL's lexical rules (see lex.go). That is enough because constants
// are lexical: a string, a number or a dollar-quoted string is recognizable
// without knowing the grammar. What the lexer cannot know (a minus sign is
// unary or binary, a parenthesized list is an IN list) is decided from the
// previous and next tokens.
//
// Normalize:
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
// Fingerprint hashes a canonical form in which case, spacing, comments,
// placeholder numbers and the length of IN (...) and ARRAY[...] lists of
// constants no longer matter.
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
func Normalize(query string) string {
	s := toValidUTF8(query)
	return normalize(s, lex(s))
}

// normalize builds Normalize's result from the query's tokens.
func normalize(s string, toks []token) string {
	next := maxParam(s, toks) + 1
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
		if lit {
			first = '$'
		} else {
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
			sep := space ||
				comment && !selfDelimiting(last) && !selfDelimiting(first) ||
				lit && isIdentCont(last) ||
				lastLiteral && isIdentCont(first)
			if sep {
				out = append(out, ' ')
			}
		}
		if lit {
			out = append(out, '$')
			out = strconv.AppendInt(out, next, 10)
			next++
		} else {
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
func Fingerprint(normalized string) uint64 {
	return fnv1a64(canonical(normalized))
}

// Of returns Normalize(query) and its Fingerprint, the common case. It lexes
// once: the fingerprint of a query equals that of its normalized form.
func Of(query string) (normalized string, fingerprint uint64) {
	s := toValidUTF8(query)
	toks := lex(s)
	normalized = normalize(s, toks)
	return normalized, fnv1a64(canonicalTokens(s, toks))
}

// canonical returns the canonical form of a query that Fingerprint hashes.
func canonical(query string) []byte {
	s := toValidUTF8(query)
	return canonicalTokens(s, lex(s))
}

// canonicalTokens builds the canonical form from the query's tokens. It
// filters toks in place.
func canonicalTokens(s string, all []token) []byte {
	toks := all[:0] // significant tokens, reusing the storage
	for _, t := range all {
		if t.kind != kSpace && t.kind != kComment {
			toks = append(toks, t)
		}
	}
	for len(toks) > 0 && isPunct(s, toks[len(toks)-1], ";") {
		toks = toks[:len(toks)-1]
	}

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
			emit("$")
			continue
		case t.kind == kIdent:
			emit(lowerASCII(s[t.start:t.end]))
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
					emit("$...")
					emit(closer)
					i = end
					continue
				}
			}
		}
		emit(text)
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
