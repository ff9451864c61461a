package client

import (
	"errors"
	"testing"
)

// TestSentinelsMatchTheirCode: errors.Is matches an APIError against the sentinel of its
// code and no other. (That there is one for every code the dispatcher answers with is
// checked against shared/apierr's table in dispatcher/clienttest.)
func TestSentinelsMatchTheirCode(t *testing.T) {
	t.Parallel()
	for code, s := range sentinels {
		if !errors.Is(&APIError{Code: code}, s) {
			t.Errorf("%s: errors.Is does not match its sentinel", code)
		}
		if errors.Is(&APIError{Code: code + "_OTHER"}, s) {
			t.Errorf("%s: errors.Is matches another code", code)
		}
	}
}
