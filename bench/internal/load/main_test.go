package load

import (
	"testing"

	"go.uber.org/goleak"
)

// Run drives its requests from goroutines; none may outlive the run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
