package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// An organisation's backlog is capped: past maxBacklog runs queued or running, a dispatch
// answers 429 BACKLOG_FULL with Retry-After and writes nothing; held jobs do not count, and
// once runs finish the organisation dispatches again.
func TestBacklogCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	code, out := b.do(admin, http.MethodPatch, "/api/v1/admin/org", `{"maxBacklog": 3}`)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.EqualValues(t, 3, out["maxBacklog"])
	waitFor(t, func() bool {
		o, err := b.app.Registry.Org(context.Background(), b.orgID)
		return err == nil && o.MaxBacklog == 3
	}, "the registry cache to follow the change")

	body := `{"job_type":"demo_llm","payload":{"prompt":"hi"}}`
	for range 3 {
		code, out := b.do(b.key, http.MethodPost, "/api/v1/dispatch", body)
		require.Equal(t, http.StatusAccepted, code, "%v", out)
	}
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	code, out = b.do(b.key, http.MethodPost, "/api/v1/dispatch", body)
	require.Equal(t, http.StatusTooManyRequests, code, "%v", out)
	require.Equal(t, "BACKLOG_FULL", out["code"])
	ctx := out["context"].(map[string]any)
	require.EqualValues(t, 3, ctx["max_backlog"])
	require.EqualValues(t, 3, ctx["backlog"])
	var runs int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&runs))
	require.Equal(t, 3, runs, "a refused dispatch writes nothing")

	// A job held for review waits for a person, not for capacity: it is accepted.
	code, out = b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_critical","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	require.Equal(t, "held_for_review", out["status"])

	// Runs finish: the organisation dispatches again (after the count's next read).
	_, err = b.pool.Exec(context.Background(), `UPDATE runs SET status = 'completed', finished_at = now() WHERE status = 'queued'`)
	require.NoError(t, err)
	waitFor(t, func() bool {
		code, _ := b.do(b.key, http.MethodPost, "/api/v1/dispatch", body)
		return code == http.StatusAccepted
	}, "the backlog to make room")
}

// An autonomous skill is dispatched: its goal is a chat payload (prompt, input or
// messages), so a payload without one is a 400 naming the field and nothing is accepted,
// and a payload with one is a 202 for a queued run.
func TestAutonomousSkillIsDispatched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, err := skill.Put(context.Background(), b.pool, b.orgID, skill.Skill{JobType: "agent", ExecutionType: "autonomous",
		RoutingHint: "default", Enabled: true}, "test")
	require.NoError(t, err)
	waitFor(t, func() bool {
		sk, _, err := b.app.Registry.Skill(context.Background(), b.orgID, "agent")
		return err == nil && sk.ExecutionType == "autonomous"
	}, "the registry to see the skill")
	code, out := b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"agent","payload":{"goal":"x"}}`)
	require.Equal(t, http.StatusBadRequest, code, "%v", out)
	require.Equal(t, "VALIDATION_FAILED", out["code"])
	require.Contains(t, fmt.Sprint(out), "needs messages")
	code, out = b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"agent","payload":{"messages":[{"role":"robot","content":"x"}]}}`)
	require.Equal(t, http.StatusBadRequest, code, "%v", out)
	require.Contains(t, fmt.Sprint(out), "payload.messages[0].role")
	var runs int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&runs))
	require.Zero(t, runs)

	code, out = b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"agent","payload":{"prompt":"Plan a trip"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", out)
	var et string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT execution_type FROM runs WHERE id = $1`, out["jobId"]).Scan(&et))
	require.Equal(t, "autonomous", et)

	// Paused on a tool call, a rejected agent is queued again: the executor hands it the
	// reason as the call's result. (Other tiers' paused runs end rejected: pipeline_test.go.)
	id := out["jobId"].(string)
	_, err = b.pool.Exec(context.Background(), `UPDATE runs SET status = 'pending_review' WHERE id = $1`, id)
	require.NoError(t, err)
	code, out = b.do(b.newKey(auth.RoleApprove), http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{"reason":"not on Fridays"}`)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "queued", out["status"])
	var status, decision string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT r.status, v.decision FROM runs r
		JOIN reviews v ON v.run_id = r.id WHERE r.id = $1`, id).Scan(&status, &decision))
	require.Equal(t, []string{"queued", "reject"}, []string{status, decision})
}
