package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestDemoLLMEndToEnd drives a demo_llm job through the four real binaries, from POST to
// completed, and checks its output, billing and spans.
func TestDemoLLMEndToEnd(t *testing.T) {
	t.Parallel()
	s := startStack(t, StackOptions{})

	code, res := s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": "demo_llm",
		"payload":  map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello"}}},
	})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	require.Equal(t, "queued", res["status"])
	require.Equal(t, "default", res["queue"])
	jobID := res["jobId"].(string)
	require.NotEmpty(t, res["traceId"])
	require.Contains(t, res["wsChannel"], jobID)

	r := s.WaitStatus(jobID, 30*time.Second, "completed", "failed", "timed_out", "cancelled")
	require.Equal(t, "completed", r["status"], "%v", r)
	out := r["output"].(map[string]any)
	require.NotEmpty(t, out["content"])
	require.Equal(t, "sim-llm", out["provider"])
	require.Equal(t, "sim-fast", out["model"])
	billing := r["billing"].(map[string]any)
	require.Greater(t, billing["tokensIn"], 0.0)
	require.Greater(t, billing["tokensOut"], 0.0)
	require.Greater(t, billing["costUsd"], 0.0)
	require.Equal(t, 1.0, billing["llmCalls"])

	code, spans := s.Do(http.MethodGet, "/api/v1/dispatch/"+jobID+"/spans", nil)
	require.Equal(t, http.StatusOK, code)
	types := map[string]map[string]any{}
	for _, sp := range spans["spans"].([]any) {
		m := sp.(map[string]any)
		types[m["type"].(string)] = m
		require.Equal(t, "ok", m["status"], "%v", m)
	}
	require.Contains(t, types, "skill_resolve")
	require.Contains(t, types, "llm_call")
	llm := types["llm_call"]["billing"].(map[string]any)
	require.Equal(t, "sim-llm", llm["provider"])
	require.Equal(t, "sim-fast", llm["model"])
	require.Equal(t, billing["costUsd"], llm["costUsd"])
	// One tree: the dispatch span is the root and every other span hangs below it.
	tree := spans["tree"].([]any)
	require.Len(t, tree, 1)
	require.Equal(t, "dispatch", tree[0].(map[string]any)["type"])
}

// TestUnknownJobTypeIsRefused checks the SKILL_NOT_FOUND contract of the skeleton.
func TestUnknownJobTypeIsRefused(t *testing.T) {
	t.Parallel()
	s := startStack(t, StackOptions{})
	code, res := s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": "no_such_job", "payload": map[string]any{"prompt": "x"},
	})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, true, res["error"])
	require.Equal(t, "SKILL_NOT_FOUND", res["code"])
	require.NotEmpty(t, res["troubleshooting"])
	require.Equal(t, "no_such_job", res["context"].(map[string]any)["job_type"])
}

// TestSkillDisabledAfterDispatch disables a skill while its job waits in the queue: the
// executor re-resolves the skill at pickup and fails the run with a clear code.
func TestSkillDisabledAfterDispatch(t *testing.T) {
	t.Parallel()
	s := startStack(t, StackOptions{NoExecutor: true})
	code, res := s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": "demo_llm", "payload": map[string]any{"prompt": "Hello"},
	})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	jobID := res["jobId"].(string)

	pool, err := pgxpool.New(context.Background(), s.DB)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pool.Exec(context.Background(), `UPDATE skills SET enabled = false WHERE job_type = 'demo_llm'`)
	require.NoError(t, err)

	s.StartExecutor()
	r := s.WaitStatus(jobID, 30*time.Second, "completed", "failed")
	require.Equal(t, "failed", r["status"])
	require.Equal(t, "SKILL_DISABLED_AFTER_DISPATCH", r["error"].(map[string]any)["code"])

	// A new dispatch of the disabled skill is refused up front.
	code, res = s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": "demo_llm", "payload": map[string]any{"prompt": "Hello"},
	})
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "SKILL_NOT_FOUND", res["code"])
}
