package pii

import (
	"regexp"
	"strconv"
	"strings"
)

// digitRunRe matches a run of digit groups joined by single spaces or dashes; card numbers
// are looked for among its whole-group sub-runs.
var digitRunRe = regexp.MustCompile(`\d+(?:[ \-]\d+)*`)

// findCards finds card numbers: 13–19 digits, written compact or in groups joined by one
// kind of separator (a single space or dash), passing the Luhn check and starting with an
// issuer prefix that a card network uses for that length. A card followed by more digit
// groups ("4111 1111 1111 1111 12/27") is still found, as a whole-group sub-run.
func findCards(text string) []match {
	var out []match
	for _, run := range digitRunRe.FindAllStringIndex(text, -1) {
		if !numericStartOK(text, run[0]) || !numericEndOK(text, run[1]) {
			continue
		}
		out = append(out, cardsInRun(text, run[0], run[1])...)
	}
	return out
}

// cardsInRun scans the groups of one digit run, trying at each group the longest sequence
// of whole groups that is a valid card.
func cardsInRun(text string, start, end int) []match {
	type group struct{ start, end int }
	var groups []group
	for i := start; i < end; {
		j := i
		for j < end && isDigit(text[j]) {
			j++
		}
		groups = append(groups, group{i, j})
		i = j + 1
	}
	var out []match
	for a := 0; a < len(groups); a++ {
		digits := 0
		best := -1
		var sep byte
		for b := a; b < len(groups); b++ {
			if b > a {
				c := text[groups[b].start-1]
				if sep != 0 && c != sep {
					break
				}
				sep = c
			}
			digits += groups[b].end - groups[b].start
			if digits > 19 {
				break
			}
			if digits >= 13 && validCard(compactDigits(text[groups[a].start:groups[b].end])) {
				best = b
			}
		}
		if best >= 0 {
			s, e := groups[a].start, groups[best].end
			num := compactDigits(text[s:e])
			out = append(out, match{start: s, end: e, detector: DetectorCreditCard,
				mask: "[CREDIT_CARD ****" + num[len(num)-4:] + "]"})
			a = best
		}
	}
	return out
}

func compactDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func validCard(num string) bool {
	return luhn(num) && knownIIN(num)
}

// luhn reports whether the digits pass the Luhn (mod 10) check every card number carries.
func luhn(num string) bool {
	sum := 0
	double := false
	for i := len(num) - 1; i >= 0; i-- {
		d := int(num[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// iinRange is an issuer identification number range of a card network and the lengths
// its cards have.
type iinRange struct {
	lo, hi  int // inclusive, compared with the first len(strconv.Itoa(lo)) digits
	lengths [2]int
}

// iinRanges lists the major networks' prefixes (ISO/IEC 7812 as published by the networks):
// Luhn alone passes one random digit string in ten, and the prefix check cuts that further
// for order numbers and other identifiers.
var iinRanges = []iinRange{
	{4, 4, [2]int{13, 19}},           // Visa (13, 16, 19)
	{51, 55, [2]int{16, 16}},         // Mastercard
	{2221, 2720, [2]int{16, 16}},     // Mastercard 2-series
	{34, 34, [2]int{15, 15}},         // American Express
	{37, 37, [2]int{15, 15}},         // American Express
	{6011, 6011, [2]int{16, 19}},     // Discover
	{644, 649, [2]int{16, 19}},       // Discover
	{65, 65, [2]int{16, 19}},         // Discover, RuPay
	{622126, 622925, [2]int{16, 19}}, // Discover co-branded UnionPay
	{62, 62, [2]int{16, 19}},         // UnionPay
	{81, 82, [2]int{16, 16}},         // UnionPay 81, RuPay 82
	{3528, 3589, [2]int{16, 19}},     // JCB
	{300, 305, [2]int{14, 19}},       // Diners Club International
	{36, 36, [2]int{14, 19}},         // Diners Club
	{38, 39, [2]int{16, 19}},         // Diners Club
	{2200, 2204, [2]int{16, 19}},     // Mir
	{50, 50, [2]int{13, 19}},         // Maestro
	{56, 69, [2]int{13, 19}},         // Maestro and national schemes
	{60, 60, [2]int{16, 16}},         // RuPay
	{508, 508, [2]int{16, 16}},       // RuPay
}

func knownIIN(num string) bool {
	for _, r := range iinRanges {
		w := len(strconv.Itoa(r.lo))
		if len(num) < r.lengths[0] || len(num) > r.lengths[1] || len(num) < w {
			continue
		}
		p, _ := strconv.Atoi(num[:w])
		if p >= r.lo && p <= r.hi {
			return true
		}
	}
	return false
}
