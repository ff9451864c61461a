package pii

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// detectorsIn scans a single string and returns the detectors that fired.
func detectorsIn(text string, keywords ...string) []string {
	var out []string
	for _, f := range Scan(text, keywords) {
		out = append(out, f.Detector)
	}
	return out
}

type detectorCase struct {
	name string
	text string
	want []string // detectors expected; nil means none
}

func runDetectorCases(t *testing.T, cases []detectorCase, keywords ...string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, detectorsIn(tc.text, keywords...), "text: %q", tc.text)
		})
	}
}

var (
	email   = []string{DetectorEmail}
	phone   = []string{DetectorPhone}
	ssn     = []string{DetectorUSSSN}
	card    = []string{DetectorCreditCard}
	iban    = []string{DetectorIBAN}
	keyword = []string{DetectorKeyword}
)

func TestEmail(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"plain", "mail jane.doe@example.com today", email},
		{"plus and subdomain", "<j+tag@mail.example.co.uk>", email},
		{"unicode", "write to jürgen@bücher.de", email},
		{"uppercase", "JANE@EXAMPLE.ORG", email},
		{"leading dots trimmed", "see:..bob@example.com", email},
		{"no tld", "root@localhost", nil},
		{"one letter tld", "a@b.c", nil},
		{"handle", "ping @jane on slack", nil},
		{"retina image", "logo@2x.png", nil},
		{"double dot flags the valid tail", "a..b@example.com", email},
		{"trailing dot in local", "ab.@example.com", nil},
	})
}

func TestPhone(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"e164 compact", "call +14155552671", phone},
		{"intl spaces", "+44 20 7946 0958", phone},
		{"intl trunk in parens", "+44 (0)20 7946 0958", phone},
		{"intl dashes", "+1-555-123-4567", phone},
		{"intl dots", "+33.1.23.45.67.89", phone},
		{"intl parens", "+1 (555) 123-4567", phone},
		{"german intl", "+49 30 1234567", phone},
		{"intl followed by year", "+44 20 7946 0958 2024", phone},
		{"nanp parens", "(555) 123-4567", phone},
		{"nanp dashes", "tel: 555-123-4567.", phone},
		{"nanp dots", "555.123.4567", phone},
		{"nanp with 1", "1-800-555-0199", phone},
		{"uk london", "020 7946 0958", phone},
		{"uk mobile", "07700 900123", phone},
		{"german", "030 123456789", phone},
		{"german slash", "030/1234567", phone},
		{"german parens", "(030) 1234567", phone},
		{"french", "01 23 45 67 89", phone},
		{"french dots", "01.23.45.67.89", phone},
		{"year", "founded in 2024", nil},
		{"price", "total $1,234.56 or 1234.56 EUR", nil},
		{"plus small", "+5 points, +100%", nil},
		{"price change", "+1234.56", nil},
		{"iso date", "2024-01-15", nil},
		{"eu date", "15.01.2024", nil},
		{"eu date with time", "01.02.2024 12:30", nil},
		{"order number", "ORD-555-123-4567", nil},
		{"nanp area starts with 1", "123-456-7890", nil},
		{"nanp mixed separators", "555-123.4567", nil},
		{"compact national", "07700900123", nil},
		{"uuid", "550e8400-e29b-41d4-a716-446655440000", nil},
		{"quantity", "shipped 100 200 3000 units", nil},
		{"version", "v10.2.3", nil},
	})
}

func TestUSSSN(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"dashes", "SSN 123-45-6789", ssn},
		{"spaces", "123 45 6789", ssn},
		{"area 666", "666-12-3456", nil},
		{"area 000", "000-12-3456", nil},
		{"area 9xx", "912-12-3456", nil},
		{"group 00", "123-00-4567", nil},
		{"serial 0000", "123-45-0000", nil},
		{"woolworth", "078-05-1120", nil},
		{"bare nine digits", "123456789", nil},
		{"mixed separators", "123-45 6789", nil},
		{"inside longer number", "1123-45-6789", nil},
		{"date", "2024-05-06", nil},
	})
}

func TestCreditCard(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"visa compact", "4111111111111111", card},
		{"visa spaces", "card 4111 1111 1111 1111 exp 12/27", card},
		{"visa dashes", "4012-8888-8888-1881", card},
		{"mastercard", "5555 5555 5555 4444", card},
		{"mastercard 2-series", "2223003122003222", card},
		{"amex grouping", "3782 822463 10005", card},
		{"discover", "6011111111111117", card},
		{"jcb", "3530111333300000", card},
		{"diners", "30569309025904", card},
		{"followed by more groups", "4111 1111 1111 1111 2024", card},
		{"invalid luhn", "4111 1111 1111 1112", nil},
		{"unknown iin", "1234 5678 9012 3452", nil},
		{"luhn valid but no network", "9999999999999995", nil},
		{"too short", "4111 1111 1111", nil},
		{"mixed separators", "4111-1111 1111-1111", nil},
		{"double spaces", "4111  1111  1111  1111", nil},
		{"glued to letters", "ID4111111111111111", nil},
		{"uuid digits", "00000000-0000-0000-0000-000000000000", nil},
	})
}

func TestIBAN(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"germany spaced", "IBAN DE89 3704 0044 0532 0130 00, thanks", iban},
		{"germany compact", "DE89370400440532013000", iban},
		{"lower case", "de89 3704 0044 0532 0130 00", iban},
		{"uk", "GB82 WEST 1234 5698 7654 32", iban},
		{"france", "FR14 2004 1010 0505 0001 3M02 606", iban},
		{"netherlands", "NL91ABNA0417164300", iban},
		{"belgium", "BE68 5390 0754 7034", iban},
		{"switzerland", "CH93 0076 2011 6238 5295 7", iban},
		{"spain", "ES91 2100 0418 4502 0005 1332", iban},
		{"italy", "IT60 X054 2811 1010 0000 0123 456", iban},
		{"norway", "NO93 8601 1117 947", iban},
		{"poland", "PL61 1090 1014 0000 0712 1981 2874", iban},
		{"malta", "MT84 MALT 0110 0001 2345 MTLC AST0 01S", iban},
		{"followed by word", "DE89 3704 0044 0532 0130 00 please", iban},
		{"bad checksum", "DE89 3704 0044 0532 0130 01", nil},
		{"too short for country", "DE86 3704 0044 0532 0130", nil},
		{"too long for country", "DE54370400440532013000 1", nil},
		{"too long compact", "DE543704004405320130001", nil},
		{"unknown country", "XX42 1234 5678 9012 34", nil},
		{"glued to word", "xDE89370400440532013000", nil},
	})
}

func TestKeyword(t *testing.T) {
	t.Parallel()
	runDetectorCases(t, []detectorCase{
		{"exact", "status of Project Falcon", keyword},
		{"case", "PROJECT FALCON is late", keyword},
		{"whitespace runs", "project\n  falcon", keyword},
		{"unicode case", "Die ÜBERSEE-Akte", keyword},
		{"punctuation around", "(zephyr)!", keyword},
		{"symbol keyword", "we use c++ here", keyword},
		{"part of word", "falconry and zephyrs", nil},
		{"unicode word boundary", "überseeisch", nil},
		{"part of word before", "unzephyr", nil},
	}, "project falcon", "zephyr", "übersee", "c++", "  ")
	require.Empty(t, Scan("nothing here", nil))
	require.Empty(t, Scan("zephyr", []string{"", " "}))
}

func TestPaths(t *testing.T) {
	t.Parallel()
	payload := decode(t, `{
		"customer": {"email": "jane@example.com", "first name": "x 555-123-4567"},
		"items": [{"note": "ok"}, {"note": "ok"}, {"note": "pay DE89370400440532013000"}],
		"a\"b": ["123-45-6789"],
		"ok_1": {"$ref": "Zephyr"},
		"9lives": "4111111111111111",
		"": [[ "jane@example.com" ]]
	}`)
	got := Scan(payload, []string{"zephyr"})
	// Sorted bytewise: "$." before "$[".
	require.Equal(t, []Finding{
		{Detector: DetectorEmail, Path: `$.customer.email`},
		{Detector: DetectorPhone, Path: `$.customer["first name"]`},
		{Detector: DetectorIBAN, Path: `$.items[2].note`},
		{Detector: DetectorKeyword, Path: `$.ok_1.$ref`},
		{Detector: DetectorEmail, Path: `$[""][0][0]`},
		{Detector: DetectorCreditCard, Path: `$["9lives"]`},
		{Detector: DetectorUSSSN, Path: `$["a\"b"][0]`},
	}, got)
}

func TestDedupAndSort(t *testing.T) {
	t.Parallel()
	got := Scan(map[string]any{
		"b": "a@example.com and b@example.com, zephyr",
		"a": "555-123-4567 or 555-123-4568",
	}, []string{"zephyr"})
	require.Equal(t, []Finding{
		{Detector: DetectorPhone, Path: "$.a"},
		{Detector: DetectorEmail, Path: "$.b"},
		{Detector: DetectorKeyword, Path: "$.b"},
	}, got)
}

func TestNumbersAndScalars(t *testing.T) {
	t.Parallel()
	payload := decode(t, `{"card": 4111111111111111, "n": 1234567890123, "ok": true, "nil": null, "price": 19.99}`)
	require.Equal(t, []Finding{{Detector: DetectorCreditCard, Path: "$.card"}}, Scan(payload, nil))

	var asNumber any
	dec := json.NewDecoder(strings.NewReader(`{"card": 4111111111111111}`))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&asNumber))
	require.Equal(t, []Finding{{Detector: DetectorCreditCard, Path: "$.card"}}, Scan(asNumber, nil))
	require.Equal(t, map[string]any{"card": "[CREDIT_CARD ****1111]"}, Mask(asNumber, nil))

	require.Empty(t, Scan(nil, nil))
	require.Empty(t, Scan(true, nil))
	require.Empty(t, Scan(42.0, nil))
}

func TestMask(t *testing.T) {
	t.Parallel()
	payload := decode(t, `{
		"customer": {"email": "jane@example.com", "phone": "+44 20 7946 0958", "ssn": "123-45-6789"},
		"payment": {"card": "4111 1111 1111 1111", "iban": "DE89 3704 0044 0532 0130 00"},
		"note": "Project Falcon: call 555-123-4567 or mail falcon@example.com",
		"items": [1, true, null, "fine"]
	}`)
	orig := decode(t, `{
		"customer": {"email": "jane@example.com", "phone": "+44 20 7946 0958", "ssn": "123-45-6789"},
		"payment": {"card": "4111 1111 1111 1111", "iban": "DE89 3704 0044 0532 0130 00"},
		"note": "Project Falcon: call 555-123-4567 or mail falcon@example.com",
		"items": [1, true, null, "fine"]
	}`)
	got := Mask(payload, []string{"falcon"})
	require.Equal(t, map[string]any{
		"customer": map[string]any{"email": "[EMAIL]", "phone": "[PHONE]", "ssn": "[US_SSN]"},
		"payment":  map[string]any{"card": "[CREDIT_CARD ****1111]", "iban": "[IBAN]"},
		"note":     "Project [KEYWORD]: call [PHONE] or mail [EMAIL]",
		"items":    []any{1.0, true, nil, "fine"},
	}, got)
	require.Equal(t, orig, payload, "Mask must not modify its input")
	// The masked copy is clean.
	require.Empty(t, Scan(got, []string{"falcon"}))
}

func TestKeysHoldingPII(t *testing.T) {
	t.Parallel()
	payload := map[string]any{
		"jane@example.com": "vip",
		"bob@example.com":  map[string]any{"tier": "gold"},
		"[EMAIL]":          "literal key",
	}
	findings := Scan(payload, nil)
	for _, f := range findings {
		require.NotContains(t, f.Path, "example.com")
	}
	require.Equal(t, []Finding{
		{Detector: DetectorEmail, Path: `$["[EMAIL] #2"]`},
		{Detector: DetectorEmail, Path: `$["[EMAIL] #3"]`},
	}, findings)
	require.Equal(t, map[string]any{
		"[EMAIL]":    "literal key",
		"[EMAIL] #2": map[string]any{"tier": "gold"},
		"[EMAIL] #3": "vip",
	}, Mask(payload, nil))
}

func TestQuoteJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"first name": `"first name"`,
		"a\"b\\c":    `"a\"b\\c"`,
		"tab\there":  `"tab\there"`,
		"\x01":       `"\u0001"`,
		"\xff":       "\"\uFFFD\"",
		"日本":         `"日本"`,
	} {
		require.Equal(t, want, quoteJSON(in))
		var back string
		require.NoError(t, json.Unmarshal([]byte(quoteJSON(in)), &back))
	}
}

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

func FuzzScan(f *testing.F) {
	for _, s := range []string{
		"jane@example.com", "+44 20 7946 0958", "123-45-6789", "4111 1111 1111 1111",
		"DE89 3704 0044 0532 0130 00", "Project Falcon", "(555) 123-4567", "", "\xff\xfe",
	} {
		f.Add(s, "key")
	}
	f.Fuzz(func(t *testing.T, value, key string) {
		keywords := []string{"falcon", key}
		payload := map[string]any{key: value, "list": []any{value, key}}
		findings := Scan(payload, keywords)
		masked := Mask(payload, keywords)
		require.NotNil(t, masked)
		// No finding may carry matched personal data: neither the detector nor the path holds
		// any text that a personal-data detector matched. (Keywords are the organisation's own
		// words and may legitimately be part of a mask or a path's punctuation.)
		s := NewScanner(keywords)
		for _, text := range []string{value, key} {
			for _, m := range s.findString(text) {
				if m.detector == DetectorKeyword {
					continue
				}
				secret := text[m.start:m.end]
				for _, f := range findings {
					require.NotContains(t, f.Path, secret)
					require.NotContains(t, f.Detector, secret)
				}
			}
		}
	})
}
