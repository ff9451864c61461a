package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/aichat"
)

// Which router answers park a run instead of failing it, and for how long.
func TestParkable(t *testing.T) {
	t.Parallel()
	wrap := func(code string, after time.Duration) error {
		return fmt.Errorf("iteration 2: %w", &routerclient.Error{Code: code, RetryAfter: after})
	}
	for _, c := range []struct {
		err    error
		waited time.Duration
		reason string
		delay  time.Duration
	}{
		{wrap("RATE_LIMIT_WAIT", 7*time.Second), 0, ReasonCapacity, 7 * time.Second},
		{wrap("PROVIDER_CIRCUIT_OPEN", 5*time.Second), 0, ReasonProviderDown, 5 * time.Second},
		{wrap("PROVIDER_CIRCUIT_OPEN", 0), 0, ReasonProviderDown, 5 * time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), 0, ReasonRouterDown, time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), 10 * time.Second, ReasonRouterDown, 5 * time.Second},
		{wrap("ROUTER_UNREACHABLE", 0), time.Hour, ReasonRouterDown, 30 * time.Second},
	} {
		reason, delay, ok := parkable(c.err, c.waited)
		require.True(t, ok, "%v", c.err)
		require.Equal(t, c.reason, reason)
		require.Equal(t, c.delay, delay)
	}
	for _, err := range []error{wrap("PROVIDER_UNAVAILABLE", 0), wrap("BUDGET_EXCEEDED", 0),
		wrap("RATE_LIMIT_DEADLINE", time.Second), errors.New("boom")} {
		_, _, ok := parkable(err, 0)
		require.False(t, ok, "%v", err)
	}
}

// A call the router cannot serve within the executor's capacity wait (RATE_LIMIT_WAIT)
// parks the run: back to queued with its reason and return time, the worker freed at once
// (the handler returns a park, which asynq retries after its delay without counting a
// failure). The pickup that ends the park replays nothing twice, draws the wait and
// completes the run.
func TestRateLimitWaitParksTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi")})
	b.runner.CapacityWait = 250 * time.Millisecond
	b.router.fail("llm/1", rateLimitWait(90*time.Second))
	runID := b.newRun(t, helloSkill())

	before := time.Now()
	err := b.handle(withDelivery(context.Background(), 0, 4), runID)
	p, ok := parked(err)
	require.True(t, ok, "a park, not a failure: %v", err)
	require.Equal(t, ReasonCapacity, p.Reason)
	require.Equal(t, 90*time.Second, p.Delay, "back at the router's slot")
	require.Less(t, time.Since(before), 30*time.Second, "the handler did not wait for the slot")
	require.Equal(t, "250", b.router.header("llm/1", aichat.HeaderCapacityWait),
		"the router was told how long the call may hold its worker")

	rr := b.run(t, runID)
	require.Equal(t, "queued", rr.Status, "no worker is held: the run is back on its queue")
	require.NotNil(t, rr.ParkReason)
	require.Equal(t, ReasonCapacity, *rr.ParkReason)
	require.NotNil(t, rr.ParkedUntil)
	require.WithinDuration(t, before.Add(90*time.Second), *rr.ParkedUntil, 10*time.Second)
	require.NotNil(t, rr.WaitingSince)
	require.Empty(t, rr.AttemptErrors, "waiting is not a failed attempt")
	require.Equal(t, "job:waiting", last(b.events(t, runID)))
	require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_parks_total{reason="provider_capacity"}`])

	require.NoError(t, b.handle(withDelivery(context.Background(), 0, 4), runID))
	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status)
	require.Equal(t, 2, b.router.count("llm/1"))
	require.Equal(t, 1, rr.LLMCalls)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'queue_wait'
		AND attributes->>'reason' = 'provider_capacity'`, runID), "the park is drawn as a queue_wait span")
	require.Equal(t, "1", scrape(t, b.metrics)[`switchyard_executor_resumes_total{cause="parked"}`])
}
