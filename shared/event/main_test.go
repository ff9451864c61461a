package event_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Background publishes from a goroutine of its own; Close must end it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
