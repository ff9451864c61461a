package stream_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The hub runs a feed per subscription and two loops per connection; none may outlive the hub.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
