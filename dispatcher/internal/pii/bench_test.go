package pii

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchPayload builds a realistic ~4 KB job payload: a support ticket with a customer
// record, an order with line items, and free text, holding a handful of personal data.
func benchPayload(tb testing.TB) any {
	tb.Helper()
	items := make([]any, 0, 12)
	for i := range 12 {
		items = append(items, map[string]any{
			"sku":      fmt.Sprintf("SKU-%05d-%c", 1000+i*37, 'A'+i),
			"name":     "Stainless steel water bottle, 750 ml, matte finish",
			"quantity": float64(i%3 + 1),
			"price":    19.99 + float64(i),
			"note":     "Deliver to the side entrance after 2024-05-06; gift wrap requested.",
		})
	}
	p := map[string]any{
		"ticket_id": "550e8400-e29b-41d4-a716-446655440000",
		"created":   "2024-05-06T10:31:00Z",
		"customer": map[string]any{
			"name":    "Jane Example",
			"email":   "jane.example@example.com",
			"phone":   "+44 20 7946 0958",
			"address": "221B Baker Street, London NW1 6XE, United Kingdom",
		},
		"order": map[string]any{
			"id":       "ORD-2024-000123",
			"items":    items,
			"total":    412.55,
			"currency": "GBP",
			"payment":  map[string]any{"method": "card", "card_last4": "1111", "iban": "GB82 WEST 1234 5698 7654 32"},
		},
		"messages": []any{
			"Hi, my order ORD-2024-000123 arrived damaged. The bottle was dented and the cap cracked.",
			"Could you send a replacement? I have attached photos (IMG_2024_0506.jpg, IMG_2024_0507.jpg).",
			"If easier, call me on 07700 900123 between 9 and 5, or reply to this e-mail. Thanks!",
			strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 6),
		},
		"tags": []any{"damaged", "replacement", "priority:normal", "channel:email"},
	}
	b, err := json.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("payload: %d bytes of JSON", len(b))
	return v
}

func BenchmarkScan4KB(b *testing.B) {
	payload := benchPayload(b)
	s := NewScanner([]string{"project falcon", "zephyr", "acme internal"})
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Scan(payload)) == 0 {
			b.Fatal("expected findings")
		}
	}
}

func BenchmarkMask4KB(b *testing.B) {
	payload := benchPayload(b)
	s := NewScanner([]string{"project falcon", "zephyr", "acme internal"})
	b.ReportAllocs()
	for b.Loop() {
		s.Mask(payload)
	}
}

func BenchmarkScanPackageFunc4KB(b *testing.B) {
	payload := benchPayload(b)
	kw := []string{"project falcon", "zephyr", "acme internal"}
	b.ReportAllocs()
	for b.Loop() {
		Scan(payload, kw)
	}
}
