package sqlnorm

import "strings"

// This file is a single-pass lexer of PostgreSQL's lexical rules (see
// src/backend/parser/scan.l), reduced to what normalization needs: it splits
// the text into tokens and tells literals (which are replaced) from
// everything else (which is kept). It never fails: text that PostgreSQL
// would reject still becomes tokens, and an unterminated quote or comment
// extends to the end of the input.
//
// Conventions follow a PostgreSQL 16 server with its default settings, in
// particular standard_conforming_strings = on (a backslash is an ordinary
// character in '...' strings and only escapes in E'...' strings).

// kind is the category of a token.
type kind uint8

const (
	kSpace   kind = iota // a run of whitespace
	kComment             // -- comment or /* nested comment */
	kIdent               // identifier or keyword, including NULL, TRUE, FALSE
	kQIdent              // "quoted identifier" or U&"quoted identifier"
	kString              // any string constant, including $$dollar quoted$$
	kNumber              // any numeric constant, possibly with a folded unary minus
	kParam               // $n parameter written by the client
	kOp                  // operator: + - * / < > = ~ ! @ # % ^ & | ` ? and runs of them
	kPunct               // ( ) [ ] , ; . .. : :: :=
	kOther               // any other single byte, including a lone $ and NUL
)

// token is a half-open byte range [start, end) of the lexed text.
type token struct {
	kind       kind
	start, end int
}

// isLiteral reports whether the token is a constant that normalization
// replaces with a $n placeholder.
func (t token) isLiteral() bool { return t.kind == kString || t.kind == kNumber }

// Byte classes. Bytes >= 0x80 count as letters, as in PostgreSQL, so that a
// multi-byte UTF-8 character is never split between two tokens.

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c >= 0x80
}

// isIdentCont reports whether c may continue an unquoted identifier.
func isIdentCont(c byte) bool { return isLetter(c) || isDigit(c) || c == '$' }

// isDolqCont reports whether c may continue the tag of a dollar quote.
func isDolqCont(c byte) bool { return isLetter(c) || isDigit(c) }

// isOpChar reports whether c may be part of an operator.
func isOpChar(c byte) bool {
	switch c {
	case '~', '!', '@', '#', '^', '&', '|', '`', '?', '+', '-', '*', '/', '%', '<', '>', '=':
		return true
	}
	return false
}

// isHexDigit, isOctDigit and isBinDigit classify digits of 0x, 0o and 0b
// integers.
func isHexDigit(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
func isOctDigit(c byte) bool { return '0' <= c && c <= '7' }
func isBinDigit(c byte) bool { return c == '0' || c == '1' }

// lex splits s into tokens covering all of s. Its running time is linear in
// len(s): every byte is examined a bounded number of times.
func lex(s string) []token {
	toks := make([]token, 0, len(s)/3+1)
	n := len(s)
	i := 0
	signsEnd := 0 // see scanOperator
	for i < n {
		start := i
		c := s[i]
		var next byte
		if i+1 < n {
			next = s[i+1]
		}
		var k kind
		switch {
		case isSpace(c):
			k = kSpace
			for i < n && isSpace(s[i]) {
				i++
			}
		case c == '-' && next == '-':
			k = kComment
			i = skipLineComment(s, i)
		case c == '/' && next == '*':
			k = kComment
			i = skipBlockComment(s, i)
		case c == '\'':
			k = kString
			i = scanString(s, i+1, false)
		case c == '"':
			k = kQIdent
			i, _ = scanQuoted(s, i+1, '"', false)
		case c == '$':
			k, i = scanDollar(s, i)
		case isDigit(c) || c == '.' && isDigit(next):
			k = kNumber
			i = scanNumber(s, i)
			// A minus sign directly before the number that is a unary
			// minus becomes part of the constant, as in PostgreSQL's
			// grammar (doNegate) and pg_stat_statements.
			if m := len(toks) - 1; m >= 0 && toks[m].kind == kOp &&
				toks[m].end == start && toks[m].end-toks[m].start == 1 &&
				s[toks[m].start] == '-' && unaryContext(s, toks[:m], exprKeywords) {
				start = toks[m].start
				toks = toks[:m]
			}
		case isLetter(c):
			k, i = scanWord(s, i)
		case isOpChar(c):
			k = kOp
			if i < signsEnd {
				i++ // a '+' or '-' given back by the previous operator
			} else {
				i, signsEnd = scanOperator(s, i)
			}
		case c == ':':
			k = kPunct
			i++
			if next == ':' || next == '=' {
				i++
			}
		case c == '(' || c == ')' || c == '[' || c == ']' || c == ',' || c == ';' || c == '.':
			k = kPunct
			i++
			if c == '.' && next == '.' {
				i++
			}
		default:
			k = kOther
			i++
		}
		toks = append(toks, token{kind: k, start: start, end: i})
	}
	return toks
}

// skipLineComment returns the end of the -- comment starting at i: the
// newline (which is whitespace, not part of the comment) or end of input.
func skipLineComment(s string, i int) int {
	j := strings.IndexAny(s[i:], "\r\n")
	if j < 0 {
		return len(s)
	}
	return i + j
}

// skipBlockComment returns the end of the /* comment */ starting at i.
// Block comments nest in PostgreSQL; an unterminated one runs to the end.
func skipBlockComment(s string, i int) int {
	depth := 0
	n := len(s)
	for i < n {
		if s[i] == '/' && i+1 < n && s[i+1] == '*' {
			depth++
			i += 2
		} else if s[i] == '*' && i+1 < n && s[i+1] == '/' {
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		} else {
			i++
		}
	}
	return n
}

// scanQuoted scans the body of a string or identifier quoted with q, from i
// (just after the opening quote). A doubled quote stands for one quote; if
// backslash is set, a backslash escapes the next byte. It returns the index
// just after the closing quote and true, or len(s) and false when the quote
// is never closed.
func scanQuoted(s string, i int, q byte, backslash bool) (int, bool) {
	n := len(s)
	for i < n {
		c := s[i]
		switch {
		case backslash && c == '\\':
			i += 2
		case c == q:
			if i+1 < n && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1, true
		default:
			i++
		}
	}
	return n, false
}

// scanString scans a '...' string constant whose body starts at i, with
// its continuations: in SQL, two string constants separated only by
// whitespace that includes a newline are one constant ('foo'\n'bar' is
// 'foobar'). It returns the end of the constant.
func scanString(s string, i int, backslash bool) int {
	for {
		end, closed := scanQuoted(s, i, '\'', backslash)
		if !closed {
			return end
		}
		next, ok := continuation(s, end)
		if !ok {
			return end
		}
		i = next
	}
}

// continuation reports whether a string constant closed just before i is
// continued by another '...' segment, and if so returns the index just after
// that segment's opening quote. The separator is PostgreSQL's
// whitespace_with_newline: horizontal whitespace, a newline, then any
// whitespace and -- comments each followed by a newline, where -- comments
// count as horizontal whitespace.
func continuation(s string, i int) (int, bool) {
	n := len(s)
	j := i
	for j < n {
		if s[j] == ' ' || s[j] == '\t' || s[j] == '\f' {
			j++
		} else if s[j] == '-' && j+1 < n && s[j+1] == '-' {
			j = skipLineComment(s, j)
		} else {
			break
		}
	}
	if j >= n || s[j] != '\n' && s[j] != '\r' {
		return i, false
	}
	for j < n {
		switch {
		case isSpace(s[j]):
			j++
		case s[j] == '-' && j+1 < n && s[j+1] == '-':
			j = skipLineComment(s, j)
			if j >= n {
				return i, false // a comment must be followed by a newline
			}
		case s[j] == '\'':
			return j + 1, true
		default:
			return i, false
		}
	}
	return i, false
}

// scanDollar scans what starts with '$' at i: a parameter $n, a
// dollar-quoted string $tag$...$tag$, or else a lone '$'.
func scanDollar(s string, i int) (kind, int) {
	n := len(s)
	j := i + 1
	if j < n && isDigit(s[j]) {
		for j < n && isDigit(s[j]) {
			j++
		}
		return kParam, j
	}
	// Tag: letters, digits and underscores, not starting with a digit
	// (PostgreSQL's dolq_start and dolq_cont); it may be empty.
	for j < n && isDolqCont(s[j]) {
		j++
	}
	if j >= n || s[j] != '$' {
		return kOther, i + 1
	}
	delim := s[i : j+1]
	body := j + 1
	if end := strings.Index(s[body:], delim); end >= 0 {
		return kString, body + end + len(delim)
	}
	return kString, n
}

// scanNumber scans a numeric constant starting at i (a digit, or a '.'
// followed by a digit): decimal integers and decimals with optional exponent,
// 0x/0o/0b integers, with PostgreSQL 16's underscores between digits. Letters
// and digits glued to the number (PostgreSQL 15+ rejects them as "trailing
// junk") are taken as part of the constant, so that nothing of a mistyped
// literal survives normalization.
func scanNumber(s string, i int) int {
	n := len(s)
	if s[i] == '0' && i+2 < n {
		var digit func(byte) bool
		switch s[i+1] {
		case 'x', 'X':
			digit = isHexDigit
		case 'o', 'O':
			digit = isOctDigit
		case 'b', 'B':
			digit = isBinDigit
		}
		if digit != nil {
			return skipJunk(s, scanDigits(s, i+2, digit))
		}
	}
	j := i
	if s[j] != '.' {
		j = scanDigits(s, j, isDigit)
	}
	// A decimal point, unless it starts "..", as in 1..10.
	if j < n && s[j] == '.' && !(j+1 < n && s[j+1] == '.') {
		j = scanDigits(s, j+1, isDigit)
	}
	if j < n && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < n && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < n && isDigit(s[k]) {
			j = scanDigits(s, k, isDigit)
		}
	}
	return skipJunk(s, j)
}

// scanDigits scans digit(_?digit)* from i and returns its end.
func scanDigits(s string, i int, digit func(byte) bool) int {
	n := len(s)
	for i < n {
		switch {
		case digit(s[i]):
			i++
		case s[i] == '_' && i+1 < n && digit(s[i+1]):
			i += 2
		default:
			return i
		}
	}
	return i
}

// skipJunk skips letters and digits glued to a number.
func skipJunk(s string, i int) int {
	for i < len(s) && (isLetter(s[i]) || isDigit(s[i])) {
		i++
	}
	return i
}

// scanWord scans what starts with a letter at i: a prefixed string constant
// (E'...', B'...', X'...', N'...', U&'...'), a U&"quoted identifier", or an
// identifier or keyword.
func scanWord(s string, i int) (kind, int) {
	n := len(s)
	c := s[i]
	if i+1 < n && s[i+1] == '\'' {
		switch c {
		case 'e', 'E':
			return kString, scanString(s, i+2, true)
		case 'b', 'B', 'x', 'X', 'n', 'N':
			return kString, scanString(s, i+2, false)
		}
	}
	if (c == 'u' || c == 'U') && i+2 < n && s[i+1] == '&' {
		switch s[i+2] {
		case '\'':
			return kString, scanString(s, i+3, false)
		case '"':
			end, _ := scanQuoted(s, i+3, '"', false)
			return kQIdent, end
		}
	}
	j := i + 1
	for j < n && isIdentCont(s[j]) {
		j++
	}
	return kIdent, j
}

// scanOperator scans an operator starting at i, following PostgreSQL: the
// longest run of operator characters, cut before an embedded comment start
// ("--" or "/*"), and with trailing '+' and '-' given back when the operator
// has no character outside SQL's own operators, so that "=-5" lexes as "="
// followed by "-5". It returns the end of the operator and the end of the
// run: the signs given back are each an operator of their own (lexing the rest
// of the run again would give back all but its first sign again), which the
// caller must know to stay linear on inputs like "+-+-+-...".
func scanOperator(s string, i int) (end, runEnd int) {
	n := len(s)
	j := i + 1
	for j < n && isOpChar(s[j]) {
		if j+1 < n && (s[j] == '-' && s[j+1] == '-' || s[j] == '/' && s[j+1] == '*') {
			break
		}
		j++
	}
	runEnd = j
	if j-i > 1 && (s[j-1] == '+' || s[j-1] == '-') {
		for k := i; k < j; k++ {
			switch s[k] {
			case '~', '!', '@', '#', '^', '&', '|', '`', '?', '%':
				return j, j
			}
		}
		for j-i > 1 && (s[j-1] == '+' || s[j-1] == '-') {
			j--
		}
	}
	return j, runEnd
}

// unaryContext reports whether a minus sign following toks is a unary minus:
// at the start, or after an operator, an opening bracket, a comma, a
// semicolon, a colon or a keyword that precedes an expression (one of
// keywords).
func unaryContext(s string, toks []token, keywords map[string]bool) bool {
	for k := len(toks) - 1; k >= 0; k-- {
		t := toks[k]
		switch t.kind {
		case kSpace, kComment:
			continue
		case kOp:
			return true
		case kPunct:
			switch s[t.start] {
			case ')', ']', '.':
				return false
			}
			return true
		case kIdent:
			return keywords[lowerASCII(s[t.start:t.end])]
		default:
			return false
		}
	}
	return true
}

// exprKeywords are keywords after which an expression starts, so that a
// following minus sign is unary. Keywords that are values themselves
// (NULL, TRUE, END, CURRENT_DATE, ...) and common column names are left out:
// after them a minus is binary.
var exprKeywords = map[string]bool{
	"all": true, "and": true, "any": true, "asymmetric": true, "between": true,
	"both": true, "by": true, "case": true, "distinct": true, "do": true,
	"else": true, "escape": true, "except": true, "for": true, "from": true,
	"having": true, "ilike": true, "in": true, "intersect": true, "is": true,
	"leading": true, "like": true, "limit": true, "not": true, "offset": true,
	"on": true, "or": true, "placing": true, "return": true, "returning": true,
	"select": true, "similar": true, "some": true, "symmetric": true,
	"then": true, "to": true, "trailing": true, "union": true, "using": true,
	"values": true, "when": true, "where": true, "with": true,
}

// lowerASCII lowercases ASCII letters only, as PostgreSQL does when it folds
// unquoted identifiers. It does not allocate when s has no upper case.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// Statements splits a simple Query's text into its statements, as
// PostgreSQL runs them: at semicolons outside literals, quoted names and
// comments, leaving out the empty ones.
func Statements(s string) []string {
	var out []string
	from := 0
	add := func(to int) {
		if st := strings.TrimSpace(s[from:to]); st != "" && !onlyComments(st) {
			out = append(out, st)
		}
	}
	for _, t := range lex(s) {
		if t.kind == kPunct && s[t.start:t.end] == ";" {
			add(t.start)
			from = t.end
		}
	}
	add(len(s))
	return out
}

func onlyComments(s string) bool {
	for _, t := range lex(s) {
		if t.kind != kSpace && t.kind != kComment {
			return false
		}
	}
	return true
}
