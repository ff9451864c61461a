package faults

import (
	"testing"

	"go.uber.org/goleak"
)

// A phase drives its load from a goroutine; none may outlive the phase.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
