package main

import (
	"testing"

	"go.uber.org/goleak"
)

// main shuts its server down from a goroutine; the tests leave none behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
