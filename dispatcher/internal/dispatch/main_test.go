package dispatch

import (
	"testing"

	"go.uber.org/goleak"
)

// The committer's writers and a batch's concurrent enqueues run in goroutines; none may
// outlive the service or the request.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
