package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/skill"
)

// TestRateLimitedBacklogParks sends a backlog that the provider's rate limit needs longer
// to serve than the skill's timeout: waiting for capacity is buffering, not execution, so
// every job completes — parked (queued again, holding no worker) while it waits — without
// using its retries (it has none), and the provider never answers 429.
func TestRateLimitedBacklogParks(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{
		SimArgs:  []string{"--model", "sim-fast=latency=constant:20ms,output=constant:5,rpm=60"},
		ExtraEnv: []string{"SWITCHYARD_CAPACITY_WAIT=1s"},
	}})
	ctx := context.Background()
	// The router keeps a margin under the simulator's 60 RPM: the two buckets start at
	// different moments.
	_, err := b.pool.Exec(ctx, `INSERT INTO provider_limits (provider_config_id, model, rpm)
		SELECT id, 'sim-fast', 57 FROM provider_configs WHERE org_id = $1`, b.orgID)
	require.NoError(t, err)
	timeout, retries := 5, 0
	b.putSkill(t, skill.Skill{JobType: "burst", ExecutionType: "llm_only", RoutingHint: "fast",
		TimeoutSeconds: &timeout, MaxRetries: &retries})

	// 57 go at once (a full bucket), the other 15 one every ~1.05 s: the last waits ~16 s,
	// far beyond the 5 s timeout.
	const n = 72
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.dispatch(t, "burst", map[string]any{"prompt": fmt.Sprintf("backlog %d", i)})
	}
	parked := 0
	for _, id := range ids {
		r := b.WaitStatus(id, 60*time.Second, "completed", "failed", "timed_out", "cancelled")
		require.Equal(t, "completed", r["status"], "%v", r)
		require.Empty(t, r["attemptErrors"], "a park is not a failed attempt")
		for _, e := range b.events(t, id) {
			if e["type"] == "job:waiting" {
				parked++
				require.Equal(t, "provider_capacity", e["data"].(map[string]any)["reason"])
				break
			}
		}
	}
	require.GreaterOrEqual(t, parked, 5, "the jobs beyond the burst waited parked")
	st := b.simStats(t)
	require.Equal(t, n, st.Served)
	require.Equal(t, st.Requests, st.Served, "no upstream 429s")

	// A parked run's wait is drawn in its span tree.
	var waits int
	for _, id := range ids {
		for _, sp := range b.spans(t, id) {
			if sp["type"] == "queue_wait" && sp["attributes"].(map[string]any)["reason"] == "provider_capacity" {
				waits++
			}
		}
	}
	require.GreaterOrEqual(t, waits, parked)
}

// TestCapacityWaitIsBounded: a run may wait for provider capacity for one call at most the
// executor's maximum queue time; past it the run ends timed_out, saying why.
func TestCapacityWaitIsBounded(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{StackOptions: StackOptions{
		SimArgs:  []string{"--model", "sim-fast=latency=constant:20ms,output=constant:5"},
		ExtraEnv: []string{"SWITCHYARD_CAPACITY_WAIT=1s", "SWITCHYARD_MAX_QUEUE_TIME=3s"},
	}})
	_, err := b.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm)
		SELECT id, 'sim-fast', 6 FROM provider_configs WHERE org_id = $1`, b.orgID)
	require.NoError(t, err)
	b.putSkill(t, skill.Skill{JobType: "slowlane", ExecutionType: "llm_only", RoutingHint: "fast"})
	ids := make([]string, 7) // six drain the bucket; the seventh would wait 10 s
	for i := range ids {
		ids[i] = b.dispatch(t, "slowlane", map[string]any{"prompt": fmt.Sprintf("bounded %d", i)})
	}
	timedOut := 0
	for _, id := range ids {
		r := b.WaitStatus(id, 30*time.Second, "completed", "failed", "timed_out")
		if r["status"] == "timed_out" {
			timedOut++
			require.Equal(t, "RATE_LIMIT_QUEUE_TIMEOUT", r["error"].(map[string]any)["code"], "%v", r)
		} else {
			require.Equal(t, "completed", r["status"], "%v", r)
		}
	}
	require.Equal(t, 1, timedOut)
}

// TestRouterOutageParksRuns: while the router is down, runs wait parked — holding no worker
// and using none of their retries — and complete once it is back, instead of failing after
// their retries ran out during the restart.
func TestRouterOutageParksRuns(t *testing.T) {
	t.Parallel()
	b := setupExec(t, execOptions{})
	one := 1
	b.putSkill(t, skill.Skill{JobType: "patient", ExecutionType: "llm_only", RoutingHint: "fast", MaxRetries: &one})
	b.kill(t, "provider-router", syscall.SIGKILL)
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = b.dispatch(t, "patient", map[string]any{"prompt": fmt.Sprintf("outage %d", i)})
	}
	// Two parks each: longer than a retry with backoff would have lasted.
	waitFor(t, 60*time.Second, "every run to park twice", func() bool {
		for _, id := range ids {
			n := 0
			for _, e := range b.events(t, id) {
				if e["type"] == "job:waiting" && e["data"].(map[string]any)["reason"] == "router_unreachable" {
					n++
				}
			}
			if n < 2 {
				return false
			}
		}
		return true
	})
	b.start("provider-router")
	for _, id := range ids {
		r := b.WaitStatus(id, 60*time.Second, "completed", "failed", "timed_out")
		require.Equal(t, "completed", r["status"], "%v", r)
		require.Empty(t, r["attemptErrors"])
	}
}
