package app

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// held is a handler whose calls run until released, announcing each as it begins.
type held struct {
	begun   chan string
	release chan struct{}
}

func newHeld() *held { return &held{begun: make(chan string, 16), release: make(chan struct{})} }

func (h *held) ProcessTask(ctx context.Context, t *asynq.Task) error {
	h.begun <- t.Type()
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil
}

func TestAChainStartsOnlyWhenTheCoordinatorHasRoom(t *testing.T) {
	h := newHeld()
	a := newAdmission(1)
	steps, starts := a.steps(h), a.starts(h)
	ctx := context.Background()
	// A step end is being applied: the start waits for it...
	go steps.ProcessTask(ctx, asynq.NewTask("step", nil))
	require.Equal(t, "step", <-h.begun)
	startDone := make(chan error, 1)
	go func() { startDone <- starts.ProcessTask(ctx, asynq.NewTask("start", nil)) }()
	waitWaiting(t, a, 1)
	// ...while another step end goes ahead at once.
	go steps.ProcessTask(ctx, asynq.NewTask("step", nil))
	require.Equal(t, "step", <-h.begun, "a step end waited behind a start")
	require.Empty(t, h.begun, "a start began while step ends were being applied")
	// Both step ends finish: the start begins.
	h.release <- struct{}{}
	h.release <- struct{}{}
	require.Equal(t, "start", <-h.begun)
	close(h.release)
	require.NoError(t, <-startDone)
}

func TestAWaitingStartGivesUpWithItsContext(t *testing.T) {
	h := newHeld()
	defer close(h.release)
	a := newAdmission(1)
	go a.steps(h).ProcessTask(context.Background(), asynq.NewTask("step", nil))
	<-h.begun
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.starts(h).ProcessTask(ctx, asynq.NewTask("start", nil)) }()
	waitWaiting(t, a, 1)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Zero(t, a.Waiting())
	require.Empty(t, h.begun, "the start began after its context ended")
}

func TestStartsRunAtOnceUpToTheirNumber(t *testing.T) {
	h := newHeld()
	a := newAdmission(2)
	done := make(chan error, 3)
	for range 3 {
		go func() { done <- a.starts(h).ProcessTask(context.Background(), asynq.NewTask("start", nil)) }()
	}
	<-h.begun
	<-h.begun
	waitWaiting(t, a, 1)
	require.Empty(t, h.begun, "a third start began beside two")
	h.release <- struct{}{}
	<-h.begun
	close(h.release)
	for range 3 {
		require.NoError(t, <-done)
	}
}

func waitWaiting(t *testing.T, a *admission, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return a.Waiting() == n }, 10*time.Second, time.Millisecond,
		"%d chain starts waiting for room", n)
}
