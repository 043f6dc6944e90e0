package sqlnorm

import "strings"

// This file is a single-pass lexer of MySQL's lexical rules (MySQL 8's
// sql_lex.cc and its reference manual, "Language Structure"), which MariaDB
// 10.11 shares but for the /*M! comments it adds. Like lex.go, it only
// splits the text into tokens and tells literals from everything else, never
// fails, and runs in linear time.
//
// It assumes the default sql_mode: without ANSI_QUOTES, "..." is a string
// (replaced), not an identifier; without NO_BACKSLASH_ESCAPES, a backslash
// escapes the next character in every string. Under either mode some
// constants may be cut short or identifiers replaced, never the reverse
// for a well-quoted '...' string.
//
// The rules, and the decisions taken where the server's behaviour cannot be
// known from the text alone:
//
//   - Strings '...' and "...", with backslash escapes and doubled quotes,
//     and the strings that follow one separated only by whitespace
//     ('a' 'b' is the one string 'ab' in MySQL), are one constant. So are
//     N'...', X'...' and B'...' (hexadecimal and bit strings), 0x1F and
//     0b101 (lower-case x and b only: 0X1F is an identifier in MySQL), and
//     numbers: 1, 1.5, .5, 1., 1e5, 1.5E-3. A charset introducer goes with
//     the string, hexadecimal or bit literal that follows it, with or
//     without spaces (_utf8mb4'x', _binary 'x', _latin1 X'41'): it is
//     recognized by name among MySQL's and MariaDB's character sets, since
//     _word 'x' may also be a column followed by a string alias.
//   - A word that starts with digits but is not a number is an identifier,
//     kept, as in MySQL: 123abc, 1_000, 0x1G, 1e (but 1e5abc is the
//     number 1e5 followed by abc). So is a word just after "ident." or
//     "@@" (t.5 is column 5 of t), and the name after a single @ (@var,
//     user@host, whose dots stay in the name).
//   - A minus sign directly before a number is folded into it when it is
//     unary, as in the PostgreSQL dialect: a=-5 and a - -5 become a=? and
//     a - ?, and 1--1, which MySQL reads as 1 - -1, becomes ?-?.
//   - ? is a prepared statement's placeholder: kept, and a constant for
//     the fingerprint's IN (...) and VALUES lists.
//   - `backtick identifiers` (`a``b` is one) are kept as they are.
//   - Comments are removed: # to the end of the line, "-- " to the end of
//     the line when the second dash is followed by whitespace, a control
//     character or the end of the text (1--1 is arithmetic), and /* ... */,
//     which do not nest and end at the first */, optimizer hints /*+ ... */
//     included. A line comment ends only at \n, as in MySQL.
//   - Executable comments /*! ... */, /*!50700 ... */ and MariaDB's
//     /*M! ... */ and /*M!100500 ... */ are code: their markers and version
//     number (5 digits, or 6 as MariaDB reads them) are dropped and their
//     content normalized like the rest, whatever the version, since the
//     server's own version is not known here; a comment inside one ends at
//     its first */, and the next */ closes the executable comment.

// lexMySQL splits s into tokens covering all of s by MySQL's lexical rules.
// Its running time is linear in len(s).
func lexMySQL(s string) []token {
	toks := make([]token, 0, len(s)/3+1)
	n := len(s)
	i := 0
	inExec := false    // inside an executable comment
	identNext := false // a word that follows is an identifier
	for i < n {
		start := i
		c := s[i]
		var next byte
		if i+1 < n {
			next = s[i+1]
		}
		ident := identNext
		identNext = false
		var k kind
		switch {
		case isSpace(c):
			k = kSpace
			for i < n && isSpace(s[i]) {
				i++
			}
		case c == '#' || c == '-' && next == '-' && (i+2 >= n || isControlOrSpace(s[i+2])):
			k = kComment
			if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = n
			}
		case c == '/' && next == '*':
			k = kComment
			if m := execMarker(s, i); m > 0 && !inExec {
				i += m
				inExec = true
			} else if j := strings.Index(s[i+2:], "*/"); j >= 0 {
				i += 2 + j + 2
			} else {
				i = n
			}
		case c == '*' && next == '/' && inExec:
			k = kComment
			i += 2
			inExec = false
		case c == '\'' || c == '"':
			k = kString
			i = scanMyString(s, i)
		case c == '`':
			k = kQIdent
			i, _ = scanQuoted(s, i+1, '`', false)
		case c == '?':
			k = kParam
			i++
		case ident && isIdentCont(c):
			k = kIdent
			i = scanIdent(s, i)
		case c == '.':
			// "t.5" is column 5 of table t: after a word and before an
			// identifier character, a dot separates names.
			m := len(toks) - 1
			if isIdentCont(next) && m >= 0 && toks[m].kind == kIdent && toks[m].end == start {
				k = kPunct
				i++
				identNext = true
			} else if isDigit(next) {
				k, i = scanMyNumber(s, i)
			} else {
				k = kPunct
				i++
			}
		case isDigit(c):
			k, i = scanMyNumber(s, i)
		case isLetter(c) || c == '$':
			k, i = scanMyWord(s, i)
		case c == '@':
			k = kOp
			i++
			if next == '@' {
				i++ // @@system_variable
				identNext = true
				break
			}
			// @user_variable or user@host: the name runs over
			// letters, digits, '_', '$' and dots.
			j := i
			for j < n && (isIdentCont(s[j]) || s[j] == '.') {
				j++
			}
			if j > i {
				toks = append(toks, token{kind: kOp, start: start, end: i})
				k, start, i = kIdent, i, j
			}
		case c == ':':
			k = kPunct
			i++
			if next == '=' {
				i++
			}
		case c == '(' || c == ')' || c == '[' || c == ']' || c == ',' || c == ';':
			k = kPunct
			i++
		case isMyOpChar(c):
			k = kOp
			i += myOpLen(s, i)
		default:
			k = kOther
			i++
		}
		// A minus sign directly before a number that is a unary minus
		// becomes part of the constant, as in lex.
		if k == kNumber {
			if m := len(toks) - 1; m >= 0 && toks[m].kind == kOp &&
				toks[m].end == start && toks[m].end-toks[m].start == 1 &&
				s[toks[m].start] == '-' && unaryContext(s, toks[:m], mysqlExprKeywords) {
				start = toks[m].start
				toks = toks[:m]
			}
		}
		toks = append(toks, token{kind: k, start: start, end: i})
	}
	return toks
}

// isControlOrSpace reports whether c, after "--", makes a comment in MySQL:
// whitespace or an ASCII control character.
func isControlOrSpace(c byte) bool { return c <= ' ' || c == 0x7f }

// isMyOpChar reports whether c starts a MySQL operator.
func isMyOpChar(c byte) bool {
	switch c {
	case '~', '!', '^', '&', '|', '+', '-', '*', '/', '%', '<', '>', '=':
		return true
	}
	return false
}

// myOpLen returns the length of the MySQL operator at i: one of <=> ->>
// <= >= <> != << >> && || ->, or else one byte. Unlike PostgreSQL, MySQL
// has no user-defined operators, so "=-5" is "=" then "-5".
func myOpLen(s string, i int) int {
	rest := s[i:]
	if strings.HasPrefix(rest, "<=>") || strings.HasPrefix(rest, "->>") {
		return 3
	}
	if len(rest) >= 2 {
		switch rest[:2] {
		case "<=", ">=", "<>", "!=", "<<", ">>", "&&", "||", "->":
			return 2
		}
	}
	return 1
}

// execMarker returns the length of the opening marker of an executable
// comment at i, "/*!" or "/*M!" followed by an optional version number,
// or 0 if the comment at i is not executable. MySQL reads a version of 5
// digits, MariaDB of 5 or 6.
func execMarker(s string, i int) int {
	n := len(s)
	j := i + 2
	if j+1 < n && s[j] == 'M' && s[j+1] == '!' {
		j++
	}
	if j >= n || s[j] != '!' {
		return 0
	}
	j++
	d := 0
	for d < 6 && j+d < n && isDigit(s[j+d]) {
		d++
	}
	if d >= 5 {
		j += d
	}
	return j - i
}

// scanMyString scans the string constant whose opening quote (' or ") is
// at i, with backslash escapes and doubled quotes, and the strings that
// follow it separated only by whitespace, which MySQL concatenates. It
// returns the end of the constant: len(s) if a quote is not closed.
func scanMyString(s string, i int) int {
	n := len(s)
	for {
		end, closed := scanQuoted(s, i+1, s[i], true)
		if !closed {
			return end
		}
		j := end
		for j < n && isSpace(s[j]) {
			j++
		}
		if j >= n || s[j] != '\'' && s[j] != '"' {
			return end
		}
		i = j
	}
}

// scanIdent scans identifier characters from i and returns their end.
func scanIdent(s string, i int) int {
	for i < len(s) && isIdentCont(s[i]) {
		i++
	}
	return i
}

// scanExponent returns the end of the exponent e[+-]digits at i, or i if
// there is none.
func scanExponent(s string, i int) int {
	n := len(s)
	if i >= n || s[i] != 'e' && s[i] != 'E' {
		return i
	}
	j := i + 1
	if j < n && (s[j] == '+' || s[j] == '-') {
		j++
	}
	if j >= n || !isDigit(s[j]) {
		return i
	}
	return scanDigitsOnly(s, j)
}

// scanDigitsOnly scans decimal digits from i and returns their end.
func scanDigitsOnly(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// scanMyNumber scans what starts at i with a digit, or with a dot followed
// by a digit: a number (kNumber), or an identifier that starts with digits
// (kIdent), as MySQL tells them apart.
func scanMyNumber(s string, i int) (kind, int) {
	n := len(s)
	if s[i] == '0' && i+1 < n && (s[i+1] == 'x' || s[i+1] == 'b') {
		digit := isHexDigit
		if s[i+1] == 'b' {
			digit = isBinDigit
		}
		j := i + 2
		for j < n && digit(s[j]) {
			j++
		}
		if j > i+2 && (j >= n || !isIdentCont(s[j])) {
			return kNumber, j
		}
		return kIdent, scanIdent(s, i)
	}
	j := scanDigitsOnly(s, i)
	if j < n && isIdentCont(s[j]) {
		// Digits followed by a letter: 1e5, or an identifier.
		if e := scanExponent(s, j); e > j {
			return kNumber, e
		}
		return kIdent, scanIdent(s, j)
	}
	if j < n && s[j] == '.' {
		j = scanDigitsOnly(s, j+1)
		j = scanExponent(s, j)
	}
	return kNumber, j
}

// scanMyWord scans what starts with a letter, '_' or '$' at i: a prefixed
// string constant (N'...', X'...', B'...'), a charset introducer with the
// literal it introduces, or an identifier or keyword.
func scanMyWord(s string, i int) (kind, int) {
	n := len(s)
	if i+1 < n && s[i+1] == '\'' {
		switch s[i] {
		case 'x', 'X', 'b', 'B':
			end, _ := scanQuoted(s, i+2, '\'', false)
			return kString, end
		case 'n', 'N':
			return kString, scanMyString(s, i+1)
		}
	}
	j := scanIdent(s, i)
	if s[i] == '_' && charsets[lowerASCII(s[i+1:j])] {
		if end, ok := introduced(s, j); ok {
			return kString, end
		}
	}
	return kIdent, j
}

// introduced returns the end of the literal that a charset introducer
// ending at i introduces, after optional whitespace: a string, a
// hexadecimal or a bit literal. It reports false if there is none.
func introduced(s string, i int) (int, bool) {
	n := len(s)
	for i < n && isSpace(s[i]) {
		i++
	}
	if i >= n {
		return 0, false
	}
	switch c := s[i]; {
	case c == '\'' || c == '"':
		return scanMyString(s, i), true
	case (c == 'x' || c == 'X' || c == 'b' || c == 'B') && i+1 < n && s[i+1] == '\'':
		end, _ := scanQuoted(s, i+2, '\'', false)
		return end, true
	case c == '0' && i+1 < n && (s[i+1] == 'x' || s[i+1] == 'b'):
		if k, end := scanMyNumber(s, i); k == kNumber {
			return end, true
		}
	}
	return 0, false
}

// charsets are the character sets of MySQL 8 and MariaDB 10.11, whose
// names preceded by '_' are introducers (utf8 is an alias of utf8mb3).
var charsets = map[string]bool{
	"armscii8": true, "ascii": true, "big5": true, "binary": true,
	"cp1250": true, "cp1251": true, "cp1256": true, "cp1257": true,
	"cp850": true, "cp852": true, "cp866": true, "cp932": true,
	"dec8": true, "eucjpms": true, "euckr": true, "gb18030": true,
	"gb2312": true, "gbk": true, "geostd8": true, "greek": true,
	"hebrew": true, "hp8": true, "keybcs2": true, "koi8r": true,
	"koi8u": true, "latin1": true, "latin2": true, "latin5": true,
	"latin7": true, "macce": true, "macroman": true, "sjis": true,
	"swe7": true, "tis620": true, "ucs2": true, "ujis": true,
	"utf16": true, "utf16le": true, "utf32": true, "utf8": true,
	"utf8mb3": true, "utf8mb4": true,
}

// mysqlExprKeywords are the keywords after which a minus sign is unary in
// MySQL: PostgreSQL's, and MySQL's operators spelled as words, INTERVAL
// (INTERVAL -1 DAY), DEFAULT (a column's DEFAULT -1) and the compound
// statements' conditions.
var mysqlExprKeywords = func() map[string]bool {
	m := make(map[string]bool, len(exprKeywords)+12)
	for k := range exprKeywords {
		m[k] = true
	}
	for _, k := range []string{"div", "mod", "xor", "regexp", "rlike",
		"interval", "default", "elseif", "while", "until", "sounds"} {
		m[k] = true
	}
	return m
}()

// canonicalName returns the canonical form of an identifier or keyword
// token: lowercased (ASCII only), and in MySQL a `backtick` identifier made
// only of identifier characters is written as the bare name, since `Id`
// and Id are the same identifier; other quoted identifiers are kept as
// they are.
func canonicalName(d Dialect, s string, t token) string {
	text := s[t.start:t.end]
	if t.kind != kQIdent {
		return lowerASCII(text)
	}
	if d != MySQL || len(text) < 3 || text[len(text)-1] != '`' {
		return text
	}
	name := text[1 : len(text)-1]
	for i := 0; i < len(name); i++ {
		if !isIdentCont(name[i]) {
			return text
		}
	}
	return lowerASCII(name)
}

// sameRows is called by canonicalTokens on a MySQL query's significant
// tokens when toks[close] is the ')' matching toks[open]. If they delimit
// the first row of a VALUES list, VALUES (...) or VALUES ROW(...), it
// returns the index of the last token of the rows that follow and have the
// same tokens, constants and ? placeholders alike, which the canonical
// form leaves out; otherwise close.
//
// A row that holds another VALUES list is never compared, so that every
// token is compared at most once as part of a first row (against as many
// equal rows, each at least as long, skipped once): linear time.
func sameRows(s string, toks []token, open, close int) int {
	var first int
	switch {
	case open >= 1 && isValues(s, toks[open-1]):
		first = open
	case open >= 2 && toks[open-1].kind == kIdent && lowerASCII(s[toks[open-1].start:toks[open-1].end]) == "row" &&
		isValues(s, toks[open-2]):
		first = open - 1
	default:
		return close
	}
	width := close - first + 1
	end := close
	for end+1+width < len(toks) && isPunct(s, toks[end+1], ",") {
		row := end + 2
		for k := 0; k < width; k++ {
			a, b := toks[first+k], toks[row+k]
			if a.kind == kIdent && isValues(s, a) {
				return end
			}
			if (a.isLiteral() || a.kind == kParam) && (b.isLiteral() || b.kind == kParam) {
				continue
			}
			if a.kind != b.kind {
				return end
			}
			if a.kind == kIdent || a.kind == kQIdent {
				if canonicalName(MySQL, s, a) != canonicalName(MySQL, s, b) {
					return end
				}
			} else if s[a.start:a.end] != s[b.start:b.end] {
				return end
			}
		}
		end = row + width - 1
	}
	return end
}

// isValues reports whether t is the keyword VALUES, or VALUE, its synonym
// in MySQL's INSERT.
func isValues(s string, t token) bool {
	if t.kind != kIdent || t.end-t.start < 5 || t.end-t.start > 6 {
		return false
	}
	w := lowerASCII(s[t.start:t.end])
	return w == "values" || w == "value"
}
