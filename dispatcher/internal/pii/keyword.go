package pii

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// keywordMatcher finds an organisation's keywords: case-insensitive under Unicode simple case
// folding, whole words in any script, and any run of white space in a keyword matching any
// run of white space in the text ("Project  Falcon" for "project falcon").
//
// It folds the text once and then uses strings.Index per keyword rather than a regexp:
// an unanchored case-insensitive alternation has no literal prefix to skip ahead with, and
// was most of the scan time. Per-keyword search is linear in the number of keywords, which
// suits lists of tens; lists of thousands would want Aho-Corasick.
type keywordMatcher struct {
	folded []string // canonical forms, longest first, deduplicated
}

func newKeywordMatcher(keywords []string) *keywordMatcher {
	var folded []string
	for _, k := range keywords {
		if f := strings.Join(strings.Fields(k), " "); f != "" {
			folded = append(folded, foldString(f))
		}
	}
	if len(folded) == 0 {
		return nil
	}
	slices.SortFunc(folded, func(a, b string) int { return len(b) - len(a) })
	return &keywordMatcher{folded: slices.Compact(folded)}
}

func (k *keywordMatcher) find(text string) []match {
	folded, offs := foldWithOffsets(text)
	var out []match
	for _, kw := range k.folded {
		for from := 0; from < len(folded); {
			i := strings.Index(folded[from:], kw)
			if i < 0 {
				break
			}
			pos := from + i
			start, end := pos, pos+len(kw)
			if offs != nil {
				start, end = offs[start], offs[end]
			}
			if _, _, ok := acceptWholeWord(text, start, end); ok {
				out = append(out, match{start: start, end: end, detector: DetectorKeyword, mask: "[KEYWORD]"})
				from = pos + len(kw)
			} else {
				from = pos + 1
			}
		}
	}
	return out
}

// foldRune maps every rune of a case-folding orbit (k, K, U+212A KELVIN SIGN) to one
// representative, so that comparing folded strings is case-insensitive under simple folding.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	best := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f) // an orbit with an ASCII member folds like ASCII
		}
		best = min(best, f)
	}
	return best
}

func foldString(s string) string {
	f, _ := foldWithOffsets(s)
	return f
}

// foldWithOffsets returns text folded rune by rune, every white-space run turned into one
// space, and for each byte offset of the folded text that starts a rune (and its end) the
// offset in text it came from, so matches can be mapped back for masking. For ASCII text
// with single spaces, by far the most common, the offsets are the identity and nil is
// returned for them.
func foldWithOffsets(text string) (string, []int) {
	if simpleASCII(text) {
		return strings.ToLower(text), nil
	}
	var b strings.Builder
	b.Grow(len(text))
	offs := make([]int, 0, len(text)+1)
	inSpace := false
	for i, r := range text {
		if unicode.IsSpace(r) {
			if inSpace {
				continue
			}
			inSpace = true
			r = ' '
		} else {
			inSpace = false
			r = foldRune(r)
		}
		n := utf8.RuneLen(r)
		if n < 0 { // invalid UTF-8 decodes to U+FFFD, which has a length; kept for safety
			n = 1
		}
		for range n {
			offs = append(offs, i)
		}
		b.WriteRune(r)
	}
	offs = append(offs, len(text))
	return b.String(), offs
}

// acceptWholeWord checks word boundaries only where the keyword itself starts or ends with a
// word character, so "c++" or "#falcon" still match next to punctuation.
func acceptWholeWord(text string, start, end int) (int, int, bool) {
	first, _ := utf8.DecodeRuneInString(text[start:end])
	last, _ := utf8.DecodeLastRuneInString(text[start:end])
	if isWordRune(first) && start > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:start]); isWordRune(r) {
			return 0, 0, false
		}
	}
	if isWordRune(last) && end < len(text) {
		if r, _ := utf8.DecodeRuneInString(text[end:]); isWordRune(r) {
			return 0, 0, false
		}
	}
	return start, end, true
}

// simpleASCII reports whether text is ASCII with no white space but single spaces, so that
// folding is lower-casing and keeps every offset.
func simpleASCII(text string) bool {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= utf8.RuneSelf || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' ||
			(c == ' ' && i > 0 && text[i-1] == ' ') {
			return false
		}
	}
	return true
}
