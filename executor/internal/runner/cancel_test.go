package runner

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// requestCancel asks for the run's cancellation as the dispatcher's cancel endpoint does
// for a running run: state in Postgres, which the executor obeys.
func (b *bundle) requestCancel(t *testing.T, runID string) {
	t.Helper()
	ok, err := runstore.New(b.pool).RequestCancel(context.Background(), b.orgID, runID)
	require.NoError(t, err)
	require.True(t, ok, "the run is running")
}

// Cancellation is state in Postgres. Asked for while an LLM call is in flight, it ends the
// run cancelled — whether asynq's wake-up ends the handler's context at once or the loop
// finds the request before its next step — and the tool the answer asked for is not called.
func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	for _, wake := range []bool{true, false} {
		name := "found between steps"
		if wake {
			name = "woken by asynq"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, ticketAnswers())
			ct := newCountingTool(t)
			ct.register(t, b, tool.Tool{Name: "file_ticket", SideEffecting: true})
			runID := b.newRun(t, ticketSkill())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.router.before = func(step string) {
				b.requestCancel(t, runID)
				if wake {
					cancel() // Inspector.CancelProcessing: asynq cancels the handler's context
				}
			}

			require.NoError(t, b.handle(withDelivery(ctx, 0, 4), runID), "a cancellation is the run's end, not a failure")
			rr := b.run(t, runID)
			require.Equal(t, "cancelled", rr.Status)
			require.Equal(t, apierr.CodeCancelled, rr.Error["code"])
			require.Equal(t, "job:cancelled", last(b.events(t, runID)))
			require.Zero(t, ct.count(), "nothing is called after the cancellation")
			require.Equal(t, 1, b.router.count("iter/1/llm"))
		})
	}
}

// A run whose cancellation is pending when its task is delivered again (its attempt failed
// after the request) is cancelled without being claimed or calling anything.
func TestCancelPendingAtPickup(t *testing.T) {
	t.Parallel()
	b := setup(t, ticketAnswers())
	newCountingTool(t).register(t, b, tool.Tool{Name: "file_ticket", SideEffecting: true})
	runID := b.newRun(t, ticketSkill())
	b.router.fail("iter/1/llm", providerUnavailable())
	b.router.before = func(string) { b.requestCancel(t, runID) }
	require.Error(t, b.handle(withDelivery(context.Background(), 0, 4), runID))
	require.Equal(t, "queued", b.status(t, runID))

	require.NoError(t, b.handle(withDelivery(context.Background(), 1, 4), runID))
	rr := b.run(t, runID)
	require.Equal(t, "cancelled", rr.Status)
	require.Equal(t, apierr.CodeCancelled, rr.Error["code"])
	require.Equal(t, 1, rr.Attempts, "not claimed again")
	require.Equal(t, 1, b.router.count("iter/1/llm"))
}

// TestWaitOutlastsTheHandlers: Wait returns only once every handler has returned, so the
// executor closes its stores after a handler's last writes, not under them.
func TestWaitOutlastsTheHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t, ticketAnswers())
	ct := newCountingTool(t)
	ct.register(t, b, tool.Tool{Name: "file_ticket", SideEffecting: true})
	runID := b.newRun(t, ticketSkill())

	asked := make(chan struct{})
	b.router.hang("iter/1/llm")
	b.router.mu.Lock()
	b.router.before = func(step string) {
		if step == "iter/1/llm" {
			close(asked)
		}
	}
	b.router.mu.Unlock()
	ctx, lose := context.WithCancel(context.Background())
	defer lose()
	handled := make(chan error, 1)
	go func() { handled <- b.handle(ctx, runID) }()
	<-asked

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, b.runner.Wait(short), context.DeadlineExceeded, "a handler is still in its call")

	lose() // the worker gives the handler up, as asynq does at the end of the grace
	require.NoError(t, b.runner.Wait(context.Background()))
	require.Error(t, <-handled, "the handler ended with its context")
}
