package pii

import (
	"regexp"
	"strings"
)

// Phone numbers are recognised by shape, not by a numbering-plan database: libphonenumber
// (github.com/nyaruka/phonenumbers) rejects the reserved ranges that documentation, tests and
// fiction use (555, Ofcom's drama numbers) yet people do type into payloads, and its
// metadata would weigh more than the rest of the dispatcher. To keep plain numbers (years,
// prices, quantities, order numbers) out, every shape needs a '+' prefix, a trunk 0 or an
// NANP area code, and separators:
//
//   - international: +CC then groups separated by spaces, dots, dashes or parentheses,
//     8–15 digits in all ("+44 (0)20 7946 0958" may carry one more for the trunk 0);
//   - NANP: (555) 123-4567, 555-123-4567, 555.123.4567, optionally 1- first; the area code
//     starts with 2–9 (the exchange rule is not applied: 555-123-4567 is what people write);
//   - national with trunk 0 (UK, Germany, France and most of Europe): 020 7946 0958,
//     07700 900123, 030 123456789, 030/1234567, (030) 1234567, 01 23 45 67 89; 10–12 digits,
//     one kind of separator throughout.
//
// Compact forms without '+' (07700900123, 5551234567) are not matched: they cannot be told
// apart from identifiers.
var (
	phoneIntlRe     = regexp.MustCompile(`\+[1-9]\d{0,3}(?:[ .\-]?(?:\(\d{1,4}\)|\d{1,6})){1,8}`)
	phoneNANPRe     = regexp.MustCompile(`(?:1[ .\-])?(?:\(\d{3}\) ?|\d{3}[ .\-])\d{3}[ .\-]\d{4}`)
	phoneTrunkRe    = regexp.MustCompile(`0[1-9]\d{0,4}(?:[ .\-/]\d{2,10}){1,4}`)
	phoneTrunkParRe = regexp.MustCompile(`\(0[1-9]\d{0,4}\) ?\d{2,10}(?:[ .\-/]\d{2,10}){0,3}`)
)

func findPhones(text string) []match {
	var locs [][2]int
	locs = append(locs, findAll(phoneIntlRe, text, acceptIntlPhone)...)
	locs = append(locs, findAll(phoneNANPRe, text, acceptNANPPhone)...)
	locs = append(locs, findAll(phoneTrunkRe, text, acceptTrunkPhone)...)
	locs = append(locs, findAll(phoneTrunkParRe, text, acceptTrunkPhone)...)
	out := make([]match, 0, len(locs))
	for _, l := range locs {
		out = append(out, match{start: l[0], end: l[1], detector: DetectorPhone, mask: "[PHONE]"})
	}
	// The shapes overlap (a trunk number inside an international one); findString's
	// overlap pass keeps the longest.
	return out
}

// shorten tries the candidate text[start:end] and then every shorter candidate that ends
// just before a separator, longest first: a greedy match can swallow a following number
// ("+44 20 7946 0958 2024") and the right phone number is a prefix of it.
func shorten(text string, start, end int, ok func(s string) bool) (int, int, bool) {
	if !numericStartOK(text, start) {
		return 0, 0, false
	}
	for e := end; e > start; e-- {
		if e < end && !strings.ContainsRune(" .-/", rune(text[e])) {
			continue
		}
		if e < end && !isDigit(text[e-1]) && text[e-1] != ')' {
			continue
		}
		if numericEndOK(text, e) && ok(text[start:e]) {
			return start, e, true
		}
	}
	return 0, 0, false
}

func acceptIntlPhone(text string, start, end int) (int, int, bool) {
	return shorten(text, start, end, func(s string) bool {
		n := countDigits(s)
		if strings.Contains(s, "(0)") {
			n--
		}
		return n >= 8 && n <= 15
	})
}

func acceptNANPPhone(text string, start, end int) (int, int, bool) {
	if !numericStartOK(text, start) || !numericEndOK(text, end) {
		return 0, 0, false
	}
	s := text[start:end]
	if s[0] == '1' && len(s) > 12 {
		s = s[2:]
	}
	area := s[1:4]
	if s[0] != '(' {
		// Mixed separators (555-123.4567) read as two numbers, not one.
		if s[3] != s[7] {
			return 0, 0, false
		}
		area = s[:3]
	}
	if area[0] < '2' {
		return 0, 0, false
	}
	return start, end, true
}

func acceptTrunkPhone(text string, start, end int) (int, int, bool) {
	return shorten(text, start, end, func(s string) bool {
		n := countDigits(s)
		if n < 10 || n > 12 {
			return false
		}
		body := s
		if s[0] == '(' {
			body = s[strings.IndexByte(s, ')')+1:]
			body = strings.TrimPrefix(body, " ")
		}
		var sep byte
		for i := 0; i < len(body); i++ {
			if c := body[i]; !isDigit(c) {
				if sep != 0 && c != sep {
					return false
				}
				sep = c
			}
		}
		return true
	})
}
