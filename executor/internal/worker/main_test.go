package worker

import (
	"testing"

	"go.uber.org/goleak"
)

// The worker runs asynq servers and follows wake-ups from goroutines; Stop must end them all.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
