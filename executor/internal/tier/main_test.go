package tier

import (
	"testing"

	"go.uber.org/goleak"
)

// A ReAct iteration runs its tool calls concurrently; none may outlive the iteration.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
