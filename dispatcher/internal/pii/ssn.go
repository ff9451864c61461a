package pii

import "regexp"

// ssnRe matches AAA-GG-SSSS or AAA GG SSSS. Nine bare digits are deliberately not an SSN:
// every nine-digit identifier (order numbers, routing numbers, ZIP+4 without the dash) would
// match, and a payload that spells an SSN out usually writes the dashes.
var ssnRe = regexp.MustCompile(`\d{3}[ \-]\d{2}[ \-]\d{4}`)

// ssnNotIssued are numbers that were published and are known not to belong to a person
// (the Woolworth wallet card, a 1940s advertisement), so a payload quoting them is not PII.
var ssnNotIssued = map[string]bool{"078051120": true, "219099999": true}

func findSSNs(text string) []match {
	var out []match
	for _, l := range findAll(ssnRe, text, acceptSSN) {
		out = append(out, match{start: l[0], end: l[1], detector: DetectorUSSSN, mask: "[US_SSN]"})
	}
	return out
}

func acceptSSN(text string, start, end int) (int, int, bool) {
	s := text[start:end]
	if s[3] != s[6] || !numericStartOK(text, start) || !numericEndOK(text, end) {
		return 0, 0, false
	}
	area, group, serial := s[0:3], s[4:6], s[7:11]
	switch {
	case area == "000" || area == "666" || area[0] == '9':
		return 0, 0, false // never issued; 9xx are ITINs
	case group == "00" || serial == "0000":
		return 0, 0, false
	case ssnNotIssued[area+group+serial]:
		return 0, 0, false
	}
	return start, end, true
}
