package pii

import (
	"strconv"
	"strings"
)

// path is a JSON path under construction. It is a linked list so that descending costs one
// small allocation and the string is only built for values that produce a finding.
type path struct {
	parent *path
	// seg is the already formatted segment: ".name", `["first name"]` or "[2]".
	seg string
}

var rootPath = path{seg: "$"}

func (p path) key(k string) path {
	pp := p
	if isIdentifier(k) {
		return path{parent: &pp, seg: "." + k}
	}
	return path{parent: &pp, seg: "[" + quoteJSON(k) + "]"}
}

func (p path) index(i int) path {
	pp := p
	return path{parent: &pp, seg: "[" + strconv.Itoa(i) + "]"}
}

// String renders the path from the root, e.g. $.items[2]["first name"].
func (p path) String() string {
	var segs []string
	for q := &p; q != nil; q = q.parent {
		segs = append(segs, q.seg)
	}
	var b strings.Builder
	for i := len(segs) - 1; i >= 0; i-- {
		b.WriteString(segs[i])
	}
	return b.String()
}

// isIdentifier reports whether k can follow a dot in a JSON path: ASCII letters, digits, _
// and $, not starting with a digit. Anything else is bracket-quoted so the path stays
// unambiguous.
func isIdentifier(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// quoteJSON quotes s as a JSON string. Unlike strconv.Quote it uses JSON's escapes, and
// unlike encoding/json it does not escape <, > and &, which would only hurt readability.
func quoteJSON(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		default:
			// Invalid UTF-8 decodes to U+FFFD here, which keeps the path valid UTF-8.
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
