package runner

import (
	"testing"

	"go.uber.org/goleak"
)

// The runner starts goroutines (GPU telemetry, a ReAct iteration's concurrent tool calls);
// none may outlive its run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
