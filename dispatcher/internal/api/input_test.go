package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/api"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
)

// fields returns field -> rule of a VALIDATION_FAILED answer, and field -> message.
func fields(t *testing.T, code int, res map[string]any) (map[string]string, map[string]string) {
	t.Helper()
	require.Equal(t, http.StatusBadRequest, code, "%v", res)
	require.Equal(t, "VALIDATION_FAILED", res["code"], "%v", res)
	rules, msgs := map[string]string{}, map[string]string{}
	for _, f := range res["context"].(map[string]any)["fields"].([]any) {
		m := f.(map[string]any)
		rules[m["field"].(string)] = m["rule"].(string)
		msgs[m["field"].(string)] = m["message"].(string)
	}
	return rules, msgs
}

// TestNULIsRefusedNotRetried covers every path that writes a caller's text: a NUL character,
// which PostgreSQL stores in neither text nor jsonb, is a 400 naming the field — never the
// 503 DATABASE_UNAVAILABLE "safe to retry" that made clients retry it forever — and nothing
// is written.
func TestNULIsRefusedNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	_, held := b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"pay"}}`)
	heldID := held["jobId"].(string)
	runsBefore := b.count(`SELECT count(*) FROM runs`)

	cases := []struct {
		name, key, method, path, body, field string
	}{
		{"dispatch payload", b.key, http.MethodPost, "/api/v1/dispatch",
			`{"job_type":"demo_llm","payload":{"messages":[{"role":"user","content":"a\u0000b"}]}}`, "payload.messages[0].content"},
		{"dispatch payload member name", b.key, http.MethodPost, "/api/v1/dispatch",
			`{"job_type":"demo_llm","payload":{"prompt":"x","k\u0000":1}}`, `payload.k\u0000`},
		{"dispatch user", b.key, http.MethodPost, "/api/v1/dispatch",
			`{"job_type":"demo_llm","user_id":"\u0000","payload":{"prompt":"x"}}`, "user_id"},
		{"dispatch metadata", b.key, http.MethodPost, "/api/v1/dispatch",
			`{"job_type":"demo_llm","payload":{"prompt":"x"},"metadata":{"correlation_id":"c\u0000"}}`, "metadata.correlation_id"},
		{"skill", admin, http.MethodPut, "/api/v1/skills/nul_skill",
			`{"job_type":"nul_skill","execution_type":"llm_only","description":"bad\u0000"}`, "description"},
		{"key", admin, http.MethodPost, "/api/v1/admin/keys", `{"name":"k\u0000","roles":["viewer"]}`, "name"},
		{"org", admin, http.MethodPatch, "/api/v1/admin/org", `{"piiKeywords":["ok","\u0000"]}`, "piiKeywords[1]"},
		{"queue", admin, http.MethodPut, "/api/v1/admin/queues/nulq",
			`{"class":"cpu","concurrency":1,"timeoutSeconds":10,"description":"\u0000"}`, "description"},
		{"approve reason", admin, http.MethodPost, "/api/v1/dispatch/" + heldID + "/approve", `{"reason":"ok\u0000"}`, "reason"},
		{"reject reason", admin, http.MethodPost, "/api/v1/dispatch/" + heldID + "/reject", `{"reason":"no\u0000"}`, "reason"},
		{"session", "", http.MethodPost, "/api/v1/session", `{"api_key":"sy_\u0000"}`, "api_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, res := b.do(tc.key, tc.method, tc.path, tc.body)
			rules, msgs := fields(t, code, res)
			require.Equal(t, map[string]string{tc.field: "nul"}, rules)
			require.Contains(t, msgs[tc.field], `NUL character (\u0000)`)
		})
	}
	require.Equal(t, runsBefore, b.count(`SELECT count(*) FROM runs`), "no run was recorded")
	require.Zero(t, b.count(`SELECT count(*) FROM skills WHERE job_type = 'nul_skill'`))
	require.Zero(t, b.count(`SELECT count(*) FROM queues WHERE name = 'nulq'`))
	require.Zero(t, b.count(`SELECT count(*) FROM reviews`))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM api_keys`), "the test's two keys, no third")

	// In a batch the item is refused on its own, as if it had been sent alone.
	a := b.batch(b.key, `{"job_type":"demo_llm","payload":{"prompt":"ok"}}`, `{"job_type":"demo_llm","payload":{"prompt":"\u0000"}}`)
	require.Equal(t, []string{"202", "400 VALIDATION_FAILED"}, a.codes())
	require.Equal(t, []string{"payload.prompt:nul"}, a.Items[1].Error.Fields())
}

// TestDataErrorsAreNotOutages covers the safety net: a value PostgreSQL refuses as invalid
// data (SQLSTATE class 22) that no check caught is a 400, not DATABASE_UNAVAILABLE.
func TestDataErrorsAreNotOutages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A NUL in a query parameter reaches Postgres as text: 22021.
	code, res := b.do(b.key, http.MethodGet, "/api/v1/dispatch?job_type=a%00b", "")
	rules, _ := fields(t, code, res)
	require.Equal(t, map[string]string{"$": "data"}, rules)
	require.Equal(t, "22021", res["context"].(map[string]any)["sqlstate"])
}

// TestPayloadShapeIsCheckedAtDispatch: a payload its skill's tier cannot run is a 400 naming
// every wrong field, never a 202 for a run that fails in the executor.
func TestPayloadShapeIsCheckedAtDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		body   string
		fields map[string]string
	}{
		{`{"job_type":"demo_llm","payload":{}}`, map[string]string{"payload": "required"}},
		{`{"job_type":"demo_llm","payload":{"messages":"hello"}}`, map[string]string{"payload.messages": "type"}},
		{`{"job_type":"demo_react","payload":{"prompt":7}}`, map[string]string{"payload.prompt": "type"}},
		{`{"job_type":"demo_llm","payload":{"messages":[{"role":"bot","content":"x"},{"role":"user","content":3}]}}`,
			map[string]string{"payload.messages[0].role": "oneof", "payload.messages[1].content": "type"}},
	}
	for _, tc := range cases {
		code, res := b.dispatch(tc.body)
		rules, msgs := fields(t, code, res)
		require.Equal(t, tc.fields, rules, tc.body)
		for _, m := range msgs {
			require.NotContains(t, m, "openai")
			require.NotContains(t, m, "unmarshal")
		}
	}
	require.Zero(t, b.count(`SELECT count(*) FROM runs`))

	for _, ok := range []string{`{"prompt":"hi"}`, `{"input":"hi","extra":{"kept":true}}`,
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`} {
		code, res := b.dispatch(`{"job_type":"demo_llm","payload":` + ok + `}`)
		require.Equal(t, http.StatusAccepted, code, "%s: %v", ok, res)
	}

	// A batch answers the bad item on its own.
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch/batch",
		`{"items":[{"job_type":"demo_llm","payload":{"prompt":"a"}},{"job_type":"demo_llm","payload":{}}]}`)
	require.Equal(t, http.StatusMultiStatus, code, "%v", res)
	item := res["items"].([]any)[1].(map[string]any)
	require.Equal(t, 400.0, item["status"])
	f := item["error"].(map[string]any)["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)
	require.Equal(t, "payload", f["field"])
}

func TestEveryWrongFieldIsReportedWithItsPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.dispatch(`{"job_type":7,"priority":5,"user_id":["u"],"payload":{"prompt":"x"},
		"metadata":{"foo":1,"source_service":3,"correlation_id":"` + strings.Repeat("c", 300) + `"},"callback_url":"ftp://x"}`)
	rules, msgs := fields(t, code, res)
	require.Equal(t, map[string]string{"job_type": "type", "priority": "type", "user_id": "type",
		"metadata.foo": "unknown_field", "metadata.source_service": "type", "metadata.correlation_id": "max",
		"callback_url": "httpurl"}, rules)
	require.Equal(t, "must be a string", msgs["job_type"])
	require.Equal(t, "must be at most 256 characters", msgs["metadata.correlation_id"])
	require.Contains(t, msgs["metadata.foo"], "correlation_id, parent_job_id, source_service")
}

func TestRuleMessagesCarryTheirLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/t_skill", `{"job_type":"t_skill","execution_type":"llm_only",
		"temperature":2.5,"cost_ceiling_usd":1e9,"max_tokens":0,"max_iterations":5000,"tools":["`+strings.Repeat("t", 65)+`"]}`)
	_, msgs := fields(t, code, res)
	require.Equal(t, "must be at most 2", msgs["temperature"])
	require.Equal(t, "must be at most 1000", msgs["max_iterations"])
	require.Equal(t, "must be at most 99999999", msgs["cost_ceiling_usd"], "what the column holds")
	require.Equal(t, "must be at most 64 characters", msgs["tools[0]"])

	code, res = b.do(admin, http.MethodPost, "/api/v1/admin/keys", `{"name":"","roles":[]}`)
	_, msgs = fields(t, code, res)
	require.Equal(t, "is required", msgs["name"])
	require.Equal(t, "must have at least 1 item", msgs["roles"])

	code, res = b.do(admin, http.MethodPut, "/api/v1/admin/queues/q1", `{"class":"cpu","concurrency":0,"timeoutSeconds":700000}`)
	_, msgs = fields(t, code, res)
	require.Equal(t, "is required", msgs["concurrency"])
	require.Equal(t, "must be at most 604800", msgs["timeoutSeconds"])
}

func TestBodyLimitIsInTheAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"job_type":"demo_llm","payload":{"prompt":"` + strings.Repeat("a", int(api.MaxBodyBytes)) + `"}}`
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, "PAYLOAD_TOO_LARGE", res["code"])
	require.Equal(t, float64(api.MaxBodyBytes), res["context"].(map[string]any)["limit_bytes"])
	require.Contains(t, res["message"], "1048576 bytes")

	// Without a Content-Length the limit is found while reading: the same answer.
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch", io.MultiReader(strings.NewReader(big)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+b.key)
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, float64(api.MaxBodyBytes), body["context"].(map[string]any)["limit_bytes"])
}

// TestDuplicateKeysAreRefused: encoding/json keeps the last of two equal member names, so a
// body could say one thing to a reader of the first and another to the dispatcher.
func TestDuplicateKeysAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	cases := []struct{ key, method, path, body, field string }{
		{b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_critical","job_type":"demo_llm","payload":{"prompt":"x"}}`, "job_type"},
		{b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_llm","payload":{"messages":[{"role":"user","content":"a","content":"b"}]}}`,
			"payload.messages[0].content"},
		{admin, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm","execution_type":"llm_only","risk_level":"critical","risk_level":"minimal"}`,
			"risk_level"},
		{admin, http.MethodPatch, "/api/v1/admin/org", `{"orgRpm":1,"orgRpm":2}`, "orgRpm"},
	}
	for _, tc := range cases {
		code, res := b.do(tc.key, tc.method, tc.path, tc.body)
		rules, _ := fields(t, code, res)
		require.Equal(t, map[string]string{tc.field: "duplicate_key"}, rules, tc.body)
	}
	// In a batch the item is refused on its own; the batch's own members are checked too.
	a := b.batch(b.key, `{"job_type":"demo_llm","payload":{"prompt":"a","prompt":"b"}}`)
	require.Equal(t, []string{"payload.prompt:duplicate_key"}, a.Items[0].Error.Fields())
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch/batch", `{"items":[],"items":[{"job_type":"demo_llm","payload":{"prompt":"a"}}]}`)
	rules, _ := fields(t, code, res)
	require.Equal(t, map[string]string{"items": "duplicate_key"}, rules)
	require.Zero(t, b.count(`SELECT count(*) FROM runs`))
}

func TestInvalidUnicodeIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range [][]byte{
		[]byte(`{"job_type":"demo_llm","payload":{"prompt":"\ud800"}}`),
		append(append([]byte(`{"job_type":"demo_llm","payload":{"prompt":"`), 0xff), `"}}`...),
	} {
		req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+b.key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var res map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		resp.Body.Close()
		rules, _ := fields(t, resp.StatusCode, res)
		require.Equal(t, map[string]string{"payload.prompt": "utf8"}, rules)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	require.Zero(t, n)
}

// TestChainSkillIsValidatedWhenSaved: a chain skill's definition is checked when it is
// saved; every problem is a field error under "chain", and a step may not dispatch the
// chain itself.
func TestChainSkillIsValidatedWhenSaved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/t_chain", `{"job_type":"t_chain","execution_type":"chain",
		"chain":{"steps":[{"step_id":"a","job_type":"demo_llm","depends_on":["b"]},
		{"step_id":"b","job_type":"demo_llm","depends_on":["a"]},
		{"step_id":"c","job_type":"t_chain"},{"step_id":"d","job_type":"no_such_skill"}]}}`)
	_, msgs := fields(t, code, res)
	require.Contains(t, msgs["chain.steps[2].job_type"], "is not an enabled skill of this organisation")
	require.Contains(t, msgs["chain.steps[3].job_type"], "is not an enabled skill of this organisation")

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_chain", `{"job_type":"t_chain","execution_type":"chain",
		"chain":{"steps":[{"step_id":"a","job_type":"demo_llm","depends_on":["b"]},
		{"step_id":"b","job_type":"demo_llm","depends_on":["a"]}]}}`)
	_, msgs = fields(t, code, res)
	require.Equal(t, "a cycle: a → b → a", msgs["chain.steps[1].depends_on"])

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_llm", `{"job_type":"t_llm","execution_type":"llm_only",
		"chain":{"steps":[]}}`)
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["chain"], "execution_type chain")

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_chain", `{"job_type":"t_chain","execution_type":"chain",
		"chain":{"steps":[{"step_id":"a","job_type":"demo_llm"},{"step_id":"b","job_type":"demo_llm","depends_on":["a"],
		"output_mapping":{"a.output.text":"payload.context"}}]}}`)
	require.Equal(t, http.StatusCreated, code, res)
}

// TestAutonomousSkillIsValidatedWhenSaved: the autonomous block is checked when saved, each
// problem named by its field, and belongs to autonomous skills only.
func TestAutonomousSkillIsValidatedWhenSaved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/t_agent", `{"job_type":"t_agent","execution_type":"autonomous",
		"tools":["demo_search"],"autonomous":{"max_steps":5000,"max_replans":-1,"require_approval_for":["demo_search","rm_rf"],
		"approval_timeout":"2 days"}}`)
	rules, msgs := fields(t, code, res)
	delete(rules, "tools[0]") // whether the test database registers the tool is not the point
	require.Equal(t, map[string]string{"autonomous.max_steps": "range", "autonomous.max_replans": "range",
		"autonomous.require_approval_for[1]": "subset", "autonomous.approval_timeout": "duration"}, rules)
	require.Contains(t, msgs["autonomous.require_approval_for[1]"], `"rm_rf" is not one of the skill's tools`)

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_agent", `{"job_type":"t_agent","execution_type":"autonomous",
		"autonomous":{"max_stepz":3}}`)
	rules, _ = fields(t, code, res)
	require.Equal(t, map[string]string{"autonomous.max_stepz": "unknown"}, rules)

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_llm", `{"job_type":"t_llm","execution_type":"llm_only",
		"autonomous":{"max_steps":3}}`)
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["autonomous"], "execution_type autonomous")

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_agent", `{"job_type":"t_agent","execution_type":"autonomous",
		"autonomous":{"max_steps":5,"approval_timeout":"72h"}}`)
	require.Equal(t, http.StatusCreated, code, res)
}

// TestWorkflowSkillIsValidatedWhenSaved: a chain skill written as a workflow is checked
// when saved — a problem names its line and column — and carries a workflow or a chain
// block, not both, and only as execution_type chain.
func TestWorkflowSkillIsValidatedWhenSaved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin)
	put := func(body map[string]any) (int, map[string]any) {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		return b.do(admin, http.MethodPut, "/api/v1/skills/t_wf", string(raw))
	}
	const wf = "name: t\non: workflow_dispatch\njobs:\n  a:\n    runs-on: any\n    steps:\n      - uses: ./skills/%s\n"
	code, res := put(map[string]any{"job_type": "t_wf", "execution_type": "chain", "workflow": fmt.Sprintf(wf, "no_such_skill")})
	_, msgs := fields(t, code, res)
	require.Contains(t, msgs["workflow:7:15"], "no_such_skill")

	code, res = put(map[string]any{"job_type": "t_wf", "execution_type": "llm_only", "workflow": fmt.Sprintf(wf, "demo_llm")})
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["workflow"], "execution_type chain")

	code, res = put(map[string]any{"job_type": "t_wf", "execution_type": "chain", "workflow": fmt.Sprintf(wf, "demo_llm"),
		"chain": map[string]any{"steps": []any{map[string]any{"step_id": "a", "job_type": "demo_llm"}}}})
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["workflow"], "not both")

	code, res = put(map[string]any{"job_type": "t_wf", "execution_type": "chain", "workflow": fmt.Sprintf(wf, "demo_llm")})
	require.Equal(t, http.StatusCreated, code, res)
	require.Equal(t, fmt.Sprintf(wf, "demo_llm"), res["workflow"])

	// A workflow is a chain skill, and chains do not nest: a step that calls one is refused
	// when the file is saved or checked, not when it is dispatched.
	raw, err := json.Marshal(map[string]any{"job_type": "t_wf2", "execution_type": "chain", "workflow": fmt.Sprintf(wf, "t_wf")})
	require.NoError(t, err)
	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_wf2", string(raw))
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["workflow:7:15"], `"t_wf"`)
	raw, err = json.Marshal(map[string]any{"workflow": fmt.Sprintf(wf, "t_wf")})
	require.NoError(t, err)
	code, res = b.do(admin, http.MethodPost, "/api/v1/workflows/validate", string(raw))
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["workflow:7:15"], "that a step can call")
	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/t_chain2", `{"job_type":"t_chain2","execution_type":"chain",
		"chain":{"steps":[{"step_id":"a","job_type":"t_wf"}]}}`)
	_, msgs = fields(t, code, res)
	require.Contains(t, msgs["chain.steps[0].job_type"], "chains do not nest")
}

// TestWorkflowRunsOnPicksTheQueue: a job's runs-on sends its steps' runs to that queue (by
// name or class); a label that names no queue is refused when the file is checked.
func TestWorkflowRunsOnPicksTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.newKey(auth.RoleDispatch)
	const wf = "name: g\non: workflow_dispatch\njobs:\n  a:\n    runs-on: %s\n    steps:\n      - uses: ./skills/demo_llm\n        with:\n          prompt: hi\n"
	body := func(label string) string {
		raw, _ := json.Marshal(map[string]any{"workflow": fmt.Sprintf(wf, label)})
		return string(raw)
	}
	code, res := b.do(key, http.MethodPost, "/api/v1/workflows/validate", body("tpu"))
	_, msgs := fields(t, code, res)
	require.Contains(t, msgs["workflow:5:14"], "tpu", "%v", msgs)

	// The dispatcher caches the queue list; a queue registered elsewhere (another replica,
	// SQL) reaches it through the registry's notification.
	_, err := b.pool.Exec(context.Background(), `INSERT INTO queues (name, class, concurrency, timeout_seconds, description)
		VALUES ('tpu', 'gpu', 1, 60, 'test')`)
	require.NoError(t, err)
	waitFor(t, func() bool {
		code, _ := b.do(key, http.MethodPost, "/api/v1/workflows/validate", body("tpu"))
		return code == http.StatusOK
	}, "a new queue to be a runs-on label")

	for label, queue := range map[string]string{"gpu": "gpu", "default": "default", "cpu": "default"} {
		code, res = b.do(key, http.MethodPost, "/api/v1/workflows/run", body(label))
		require.Equal(t, http.StatusAccepted, code, "%v", res)
		chainID := res["chainId"].(string)
		var runID string
		waitFor(t, func() bool {
			_, c := b.do(key, http.MethodGet, "/api/v1/chains/"+chainID, "")
			steps, _ := c["steps"].([]any)
			if len(steps) == 1 {
				runID, _ = steps[0].(map[string]any)["jobId"].(string)
			}
			return runID != ""
		}, "the workflow's step to be dispatched")
		code, r := b.do(key, http.MethodGet, "/api/v1/dispatch/"+runID, "")
		require.Equal(t, http.StatusOK, code, "%v", r)
		require.Equal(t, queue, r["queue"], "runs-on %s", label)
	}
}
