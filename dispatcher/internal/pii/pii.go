// Package pii finds personal data and organisation keywords in decoded JSON payloads, so the
// dispatcher can hold high-risk jobs for review and show a reviewer a masked copy.
//
// The one security rule of the package: a matched value never leaves it. A Finding names a
// detector and a JSON path, never the text that matched, and map keys that themselves hold
// personal data are written masked in every path. Errors, logs and events built from
// findings therefore cannot leak what was found.
package pii

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
)

// Detector names, as they appear in Finding.Detector.
const (
	DetectorEmail      = "email"
	DetectorPhone      = "phone"
	DetectorUSSSN      = "us_ssn"
	DetectorCreditCard = "credit_card"
	DetectorIBAN       = "iban"
	DetectorKeyword    = "keyword"
)

// Finding says that a detector matched somewhere in the value at Path. It deliberately has no
// field for the matched text.
type Finding struct {
	// Detector is one of the Detector* constants.
	Detector string `json:"detector"`
	// Path is a JSON path such as $.customer.email or $.items[2].note. Keys that hold personal
	// data appear masked, as they do in Mask's output, so the path addresses the masked copy.
	Path string `json:"path"`
}

// Scanner holds an organisation's compiled keyword list. Keep one per organisation on hot
// paths: Scan and Mask compile the keywords on every call.
type Scanner struct {
	keywords *keywordMatcher
}

// NewScanner compiles keywords (case-insensitive, whole-word; empty entries are ignored).
func NewScanner(keywords []string) *Scanner {
	return &Scanner{keywords: newKeywordMatcher(keywords)}
}

// Scan returns the findings in payload, deduplicated per (detector, path) and sorted by path
// then detector.
func Scan(payload any, keywords []string) []Finding {
	return NewScanner(keywords).Scan(payload)
}

// Mask returns a deep copy of payload in which every detected value is replaced by a mask
// such as [EMAIL] or [CREDIT_CARD ****1111], for a reviewer's UI.
func Mask(payload any, keywords []string) any {
	return NewScanner(keywords).Mask(payload)
}

// Scan is the package-level Scan with this scanner's keywords.
func (s *Scanner) Scan(payload any) []Finding {
	w := walker{s: s, found: map[Finding]struct{}{}}
	w.walk(payload, rootPath)
	out := make([]Finding, 0, len(w.found))
	for f := range w.found {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Detector, b.Detector))
	})
	return out
}

// Mask is the package-level Mask with this scanner's keywords.
func (s *Scanner) Mask(payload any) any {
	w := walker{s: s, mask: true}
	return w.walk(payload, rootPath)
}

// walker does Scan and Mask in one traversal so that both agree on how keys are masked, and
// so on the paths findings name.
type walker struct {
	s     *Scanner
	mask  bool
	found map[Finding]struct{}
}

func (w *walker) record(matches []match, path path) {
	if w.found == nil || len(matches) == 0 {
		return
	}
	p := path.String()
	for _, m := range matches {
		w.found[Finding{Detector: m.detector, Path: p}] = struct{}{}
	}
}

// walk returns the masked copy of v when masking, and nil otherwise.
func (w *walker) walk(v any, p path) any {
	switch v := v.(type) {
	case string:
		ms := w.s.findString(v)
		w.record(ms, p)
		if w.mask {
			return applyMasks(v, ms)
		}
	case map[string]any:
		return w.walkMap(v, p)
	case []any:
		var out []any
		if w.mask {
			out = make([]any, len(v))
		}
		for i, e := range v {
			r := w.walk(e, p.index(i))
			if w.mask {
				out[i] = r
			}
		}
		if w.mask {
			return out
		}
	case json.Number:
		return w.walkNumber(string(v), v, p)
	case float64:
		// Card numbers sent as JSON numbers survive float64 up to 2^53 (every 15- and most
		// 16-digit cards); formatting without exponent gives back the digits.
		return w.walkNumber(strconv.FormatFloat(v, 'f', -1, 64), v, p)
	default:
		// bool, nil and anything that is not a decoded JSON value hold no text to scan.
		if w.mask {
			return v
		}
	}
	return nil
}

// walkNumber scans a number's digits for a card number only: the other detectors need
// separators, a plus sign or letters, which a JSON number cannot carry.
func (w *walker) walkNumber(text string, orig any, p path) any {
	ms := findCards(text)
	w.record(ms, p)
	if !w.mask {
		return nil
	}
	if len(ms) > 0 {
		return applyMasks(text, ms)
	}
	return orig
}

func (w *walker) walkMap(m map[string]any, p path) any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted so that the numbering of colliding masked keys is the same in Scan and Mask.
	slices.Sort(keys)
	var out map[string]any
	if w.mask {
		out = make(map[string]any, len(m))
	}
	var used map[string]bool
	for _, k := range keys {
		name := k
		if ms := w.s.findString(k); len(ms) > 0 {
			name = applyMasks(k, ms)
			if used == nil {
				used = make(map[string]bool)
			}
			// Two keys can mask to the same text; number the later ones so neither value is
			// lost and every path stays unique.
			base := name
			for n := 2; used[name] || (name != k && hasKey(m, name)); n++ {
				name = base + " #" + strconv.Itoa(n)
			}
			used[name] = true
			w.record(ms, p.key(name))
		}
		r := w.walk(m[k], p.key(name))
		if w.mask {
			out[name] = r
		}
	}
	if w.mask {
		return out
	}
	return nil
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
