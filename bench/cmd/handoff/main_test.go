package main

import (
	"slices"
	"testing"
)

func TestParseLevels(t *testing.T) {
	got, err := parseLevels("1x200, 200x1000")
	if err != nil || !slices.Equal(got, []level{{1, 200}, {200, 1000}}) {
		t.Fatalf("parseLevels = %v, %v", got, err)
	}
	for _, bad := range []string{"", "200", "0x10", "1x0", "ax1", "1x200,"} {
		if _, err := parseLevels(bad); err == nil {
			t.Errorf("parseLevels(%q) accepted it", bad)
		}
	}
}
