package pii

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// ibanRe matches a candidate IBAN: country code, two check digits and a BBAN written either
// compact or in groups of four separated by single spaces (the paper format), the last group
// shorter. Upper or lower case. The exact length comes from the country in acceptIBAN.
var ibanRe = regexp.MustCompile(`(?i)[a-z]{2}\d{2}(?:[a-z0-9]{11,30}|(?: [a-z0-9]{4}){2,7}(?: [a-z0-9]{1,4})?)`)

// ibanLength is the length of an IBAN per country, from the SWIFT IBAN Registry (release
// 102, 2026): every SEPA country and every other registered country. A candidate whose
// length differs from its country's is not an IBAN, whatever its checksum: mod-97 alone lets
// one random string in 97 through.
var ibanLength = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
	"BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
	"DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
	"FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
	"GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
	"LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
	"MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
	"YE": 30,
}

func findIBANs(text string) []match {
	var out []match
	for _, l := range findAll(ibanRe, text, acceptIBAN) {
		out = append(out, match{start: l[0], end: l[1], detector: DetectorIBAN, mask: "[IBAN]"})
	}
	return out
}

// acceptIBAN cuts the candidate to its country's length (the grouped pattern may have run
// into a following word or number) and checks the cut falls at the end of a group, then
// verifies the ISO 13616 mod-97 checksum.
func acceptIBAN(text string, start, end int) (int, int, bool) {
	if r, _ := utf8.DecodeLastRuneInString(text[:start]); start > 0 && isWordRune(r) {
		return 0, 0, false
	}
	country := strings.ToUpper(text[start : start+2])
	want, ok := ibanLength[country]
	if !ok {
		return 0, 0, false
	}
	n, e := 0, start
	for e < end && n < want {
		if text[e] != ' ' {
			n++
		}
		e++
	}
	if n != want || !wordEnd(text, e) {
		return 0, 0, false
	}
	if !ibanChecksumOK(strings.ToUpper(strings.ReplaceAll(text[start:e], " ", ""))) {
		return 0, 0, false
	}
	return start, e, true
}

// wordEnd reports whether no letter or digit continues the token at j.
func wordEnd(text string, j int) bool {
	if j >= len(text) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(text[j:])
	return !isWordRune(r)
}

// ibanChecksumOK computes the ISO 7064 mod-97-10 remainder of the rearranged IBAN digit by
// digit, so no big integers are needed.
func ibanChecksumOK(iban string) bool {
	rearranged := iban[4:] + iban[:4]
	rem := 0
	for i := 0; i < len(rearranged); i++ {
		c := rearranged[i]
		switch {
		case c >= '0' && c <= '9':
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			rem = (rem*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return rem == 1
}

// withoutIBANShapes drops phone matches that lie inside something shaped like an IBAN of a
// registered country: a mistyped IBAN (bad checksum) is not a phone number, though its
// digit groups can look like one ("DE89 3704 0044 0532 0130 01" holds "0532 0130 01").
func withoutIBANShapes(text string, phones []match) []match {
	if len(phones) == 0 {
		return phones
	}
	shapes := findAll(ibanRe, text, func(text string, start, end int) (int, int, bool) {
		_, known := ibanLength[strings.ToUpper(text[start:start+2])]
		r, _ := utf8.DecodeLastRuneInString(text[:start])
		return start, end, known && (start == 0 || !isWordRune(r))
	})
	out := phones[:0]
	for _, p := range phones {
		inside := false
		for _, s := range shapes {
			if p.start < s[1] && s[0] < p.end {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, p)
		}
	}
	return out
}
