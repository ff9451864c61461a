package pii

import (
	"regexp"
	"strings"
)

// emailRe matches an address with a dotted domain and an alphabetic top-level domain of two
// or more letters; internationalised (Unicode) local parts and domains are included.
// Addresses without a dot in the domain (user@localhost) are not treated as personal data.
var emailRe = regexp.MustCompile(`[\p{L}\p{N}.!#$%&'*+/=?^_{|}~\-]+@(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]{0,61}[\p{L}\p{N}])?\.)+\p{L}{2,24}`)

// fileExtensionTLDs are "top-level domains" that are really file extensions: icon@2x.png is a
// retina image name, not an address. None of them is a delegated TLD.
var fileExtensionTLDs = map[string]bool{
	"png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "webp": true,
	"css": true, "js": true, "ts": true, "tsx": true, "jsx": true, "scss": true,
}

func findEmails(text string) []match {
	var out []match
	for _, loc := range findAll(emailRe, text, acceptEmail) {
		out = append(out, match{start: loc[0], end: loc[1], detector: DetectorEmail, mask: "[EMAIL]"})
	}
	return out
}

func acceptEmail(text string, start, end int) (int, int, bool) {
	addr := text[start:end]
	at := strings.LastIndexByte(addr, '@')
	local, domain := addr[:at], addr[at+1:]
	// The regex lets dots anywhere in the local part; RFC 5322 does not (outside quotes).
	// Trimming leading dots rather than rejecting keeps "see:.bob@example.com" a match.
	trimmed := strings.TrimLeft(local, ".")
	start += len(local) - len(trimmed)
	local = trimmed
	if local == "" || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return 0, 0, false
	}
	tld := domain[strings.LastIndexByte(domain, '.')+1:]
	if fileExtensionTLDs[strings.ToLower(tld)] {
		return 0, 0, false
	}
	return start, end, true
}
