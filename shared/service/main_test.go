package service

import (
	"testing"

	"go.uber.org/goleak"
)

// Profile serves the profiler from a goroutine for the life of the process; the tests leave none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
