package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Watch closes its connection from a context.AfterFunc; nothing may outlive a watch.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
