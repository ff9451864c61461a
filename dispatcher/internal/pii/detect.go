package pii

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// match is one detection inside a string: byte offsets and the text that replaces it when
// masking. It never leaves the package.
type match struct {
	start, end int
	detector   string
	mask       string
}

// rank orders detectors when their matches overlap: the more specific, checksum-validated
// detectors win, so an IBAN or card number is not also reported as a phone number.
var rank = map[string]int{
	DetectorEmail:      0,
	DetectorIBAN:       1,
	DetectorCreditCard: 2,
	DetectorUSSSN:      3,
	DetectorPhone:      4,
	DetectorKeyword:    5,
}

// findString returns the personal-data matches in s, free of overlaps between them, followed
// by every keyword match. Keyword matches may overlap personal data: a keyword is a policy
// signal of its own and is reported even inside an e-mail address; applyMasks drops it there.
//
// Cheap byte-level prefilters decide which detectors can possibly match, so the regular
// expressions only run on the few strings of a payload that hold long digit groups or an @.
func (s *Scanner) findString(text string) []match {
	var ms []match
	if strings.IndexByte(text, '@') >= 0 {
		ms = append(ms, findEmails(text)...)
	}
	if hasIBANStart(text) {
		ms = append(ms, findIBANs(text)...)
	}
	if cluster := maxDigitCluster(text); cluster >= 8 {
		if cluster >= 13 {
			ms = append(ms, findCards(text)...)
		}
		if cluster >= 9 {
			ms = append(ms, findSSNs(text)...)
		}
		if cluster >= 10 || strings.IndexByte(text, '+') >= 0 {
			ms = append(ms, withoutIBANShapes(text, findPhones(text))...)
		}
	}
	if len(ms) > 1 {
		ms = dropOverlaps(ms)
	}
	if s.keywords != nil {
		ms = append(ms, s.keywords.find(text)...)
	}
	return ms
}

// maxDigitCluster returns the most digits in one cluster of digits joined by at most two
// separator characters in a row: "(555) 123-4567" has 10, "4111 1111 1111 1111" 16. Phone
// numbers need 8 (with a +) or 10, SSNs 9 and cards 13, so most strings skip those detectors.
func maxDigitCluster(text string) int {
	best, cur, gap := 0, 0, 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case isDigit(c):
			cur++
			gap = 0
			best = max(best, cur)
		case gap < 2 && cur > 0 && strings.IndexByte(" .-/()", c) >= 0:
			gap++
		default:
			cur, gap = 0, 0
		}
	}
	return best
}

// hasIBANStart reports whether text holds two ASCII letters followed by two digits, the
// start of every IBAN (IBANs can hold letters between their digit groups, so the digit
// cluster prefilter does not apply to them).
func hasIBANStart(text string) bool {
	for i := 0; i+4 <= len(text); i++ {
		if isASCIILetter(text[i]) && isASCIILetter(text[i+1]) && isDigit(text[i+2]) && isDigit(text[i+3]) {
			return true
		}
	}
	return false
}

func isASCIILetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// dropOverlaps keeps, among overlapping matches, the one of the best-ranked detector (then
// the longest, then the first), and returns the survivors in text order.
func dropOverlaps(ms []match) []match {
	slices.SortStableFunc(ms, func(a, b match) int {
		if d := rank[a.detector] - rank[b.detector]; d != 0 {
			return d
		}
		if d := (b.end - b.start) - (a.end - a.start); d != 0 {
			return d
		}
		return a.start - b.start
	})
	kept := make([]match, 0, len(ms))
	for _, m := range ms {
		if !slices.ContainsFunc(kept, func(k match) bool { return m.start < k.end && k.start < m.end }) {
			kept = append(kept, m)
		}
	}
	slices.SortFunc(kept, func(a, b match) int { return a.start - b.start })
	return kept
}

// applyMasks replaces every match in text with its mask.
func applyMasks(text string, ms []match) string {
	if len(ms) == 0 {
		return text
	}
	ms = dropOverlaps(slices.Clone(ms))
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(text[last:m.start])
		b.WriteString(m.mask)
		last = m.end
	}
	b.WriteString(text[last:])
	return b.String()
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isWordRune reports whether r belongs inside a word, in any script.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// numericStartOK reports whether a number may start at i: a number glued to a word, or
// following a dash, dot, slash, plus, hash or @ is part of a longer token (an order number,
// a version, a UUID, an expression) rather than a value of its own.
func numericStartOK(s string, i int) bool {
	if i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return !isWordRune(r) && !strings.ContainsRune("-./+#@_", r)
}

// numericEndOK reports whether a number may end at j: not glued to a word, and not followed
// by a separator that continues it ("…4567-89", "…4567.5", "…4567,00").
func numericEndOK(s string, j int) bool {
	if j >= len(s) {
		return true
	}
	r, size := utf8.DecodeRuneInString(s[j:])
	if isWordRune(r) {
		return false
	}
	if strings.ContainsRune("-./,:", r) && j+size < len(s) && isDigit(s[j+size]) {
		return false
	}
	return true
}

// findAll runs re over text and keeps the candidates accept approves. A rejected candidate
// does not hide a valid one that starts inside it: the search resumes one rune later.
// accept may narrow the candidate by returning other bounds inside it.
func findAll(re *regexp.Regexp, text string, accept func(text string, start, end int) (int, int, bool)) [][2]int {
	var out [][2]int
	for pos := 0; pos < len(text); {
		loc := re.FindStringIndex(text[pos:])
		if loc == nil {
			break
		}
		start, end := pos+loc[0], pos+loc[1]
		if s, e, ok := accept(text, start, end); ok {
			out = append(out, [2]int{s, e})
			pos = e
			continue
		}
		_, size := utf8.DecodeRuneInString(text[start:])
		pos = start + max(size, 1)
	}
	return out
}
