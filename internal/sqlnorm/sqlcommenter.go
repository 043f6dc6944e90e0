package sqlnorm

import (
	"net/url"
	"strings"
)

// TraceContext is a W3C trace context an application put in a query's
// text, as sqlcommenter does: a comment of key='value' pairs, values
// URL-encoded, one of them traceparent ('00-<trace id>-<parent id>-<flags>').
// OpenTelemetry's and Google's sqlcommenter instrumentations add it for
// Django, Rails, Spring, Go... so the query can be placed in their trace.
type TraceContext struct {
	TraceID  string // 32 lowercase hex digits, not all zero
	ParentID string // 16 lowercase hex digits, not all zero: the application's span
	Flags    byte   // W3C trace flags: bit 0, sampled
}

// maxCommentScan bounds the comments TraceParent looks into: a query
// made of thousands of comments costs no more than a few.
const maxCommentScan = 16

// TraceParent finds the first valid traceparent in the sqlcommenter
// comments of a query's raw text (before normalization: normalizing
// removes comments). A malformed one is ignored: no trace context, never
// a panic. The scan is textual: a comment inside a string literal counts
// too, which lets a query name no trace but the one its sender chose.
func TraceParent(text string) (TraceContext, bool) {
	if !strings.Contains(text, "traceparent") { // the common case, at the cost of one search
		return TraceContext{}, false
	}
	rest := text
	for range maxCommentScan {
		open := strings.Index(rest, "/*")
		if open < 0 {
			return TraceContext{}, false
		}
		rest = rest[open+2:]
		end := strings.Index(rest, "*/")
		if end < 0 {
			return TraceContext{}, false // cut off, as a text past the capture's limit is
		}
		comment := rest[:end]
		rest = rest[end+2:]
		if v, ok := commentValue(comment, "traceparent"); ok {
			if tc, ok := parseTraceParent(v); ok {
				return tc, true
			}
		}
	}
	return TraceContext{}, false
}

// commentValue reads a sqlcommenter comment (key='value',key='value'...,
// keys and values URL-encoded, a quote in a value escaped by a backslash)
// and returns the value of key. A comment not in that form has none.
func commentValue(comment, key string) (string, bool) {
	s := strings.TrimSpace(comment)
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '\'' {
			return "", false
		}
		k := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var v strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				v.WriteByte(s[i])
			case c == '\'':
				closed, s = true, s[i+1:]
			default:
				v.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed {
			return "", false
		}
		if dk, err := url.PathUnescape(k); err == nil && dk == key {
			dv, err := url.PathUnescape(v.String())
			return dv, err == nil
		}
		s = strings.TrimSpace(s)
		if s == "" {
			break
		}
		if s[0] != ',' {
			return "", false
		}
		s = strings.TrimSpace(s[1:])
	}
	return "", false
}

// parseTraceParent reads a W3C traceparent header's value: version 00
// exactly; a later version's first four fields, as the recommendation
// asks of a parser that does not know it; version ff is invalid.
func parseTraceParent(v string) (TraceContext, bool) {
	if len(v) < 55 || (v[:2] == "00" && len(v) != 55) || (len(v) > 55 && v[55] != '-') {
		return TraceContext{}, false
	}
	version, trace, parent, flags := v[0:2], v[3:35], v[36:52], v[53:55]
	if v[2] != '-' || v[35] != '-' || v[52] != '-' || version == "ff" ||
		!lowerHex(version) || !lowerHex(trace) || !lowerHex(parent) || !lowerHex(flags) ||
		allZero(trace) || allZero(parent) {
		return TraceContext{}, false
	}
	return TraceContext{TraceID: trace, ParentID: parent, Flags: hexByte(flags)}, true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }

// hexByte reads two lowercase hex digits (checked by lowerHex).
func hexByte(s string) byte {
	digit := func(c byte) byte {
		if c <= '9' {
			return c - '0'
		}
		return c - 'a' + 10
	}
	return digit(s[0])<<4 | digit(s[1])
}
