package harness_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The harness waits on each process it starts from a goroutine; none may outlive the test
// that started the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
