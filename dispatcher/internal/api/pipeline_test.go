package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/callback"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func (b *bundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (b *bundle) dispatch(body string) (int, map[string]any) {
	b.t.Helper()
	return b.do(b.key, http.MethodPost, "/api/v1/dispatch", body)
}

func TestResidencyViolationWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.dispatch(`{"job_type":"demo_us_only","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusForbidden, code, "%v", res)
	require.Equal(t, "RESIDENCY_VIOLATION", res["code"])
	ctx := res["context"].(map[string]any)
	require.Equal(t, "us_only", ctx["data_residency"])
	require.Equal(t, "eu", ctx["org_jurisdiction"])
	require.Zero(t, b.count(`SELECT count(*) FROM runs`))
	pending, err := queue.Pending(context.Background(), b.rdb, "default")
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 0, 0}, pending, "nothing reached Redis")

	// The same organisation may run the EU-only skill, flagged for audit (risk limited).
	code, res = b.dispatch(`{"job_type":"demo_eu_only","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	require.Equal(t, true, res["auditFlagged"])
}

func TestCriticalIsHeldThenApproved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"pay 10 EUR"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	require.Equal(t, "held_for_review", res["status"])
	reasons := res["holdReasons"].([]any)
	require.Len(t, reasons, 1)
	require.Equal(t, "critical_risk", reasons[0].(map[string]any)["detector"])
	id := res["jobId"].(string)
	_, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), id)
	require.ErrorIs(t, err, asynq.ErrQueueNotFound, "a held job is not enqueued")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM run_events WHERE run_id = $1 AND type = 'job:held'`, id))

	// Dispatch keys cannot approve; approvers can.
	code, _ = b.do(b.key, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"ok"}`)
	require.Equal(t, http.StatusForbidden, code)
	approver := b.newKey(auth.RoleApprove)
	code, list := b.do(approver, http.MethodGet, "/api/v1/reviews", "")
	require.Equal(t, http.StatusOK, code)
	items := list["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "critical", items[0].(map[string]any)["riskLevel"])

	code, res = b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"looks right"}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, "queued", res["status"])
	info, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), id)
	require.NoError(t, err, "approval enqueues")
	require.Equal(t, queue.TypeRun, info.Type)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM spans WHERE run_id = $1 AND type = 'governance_review'
		AND attributes->>'reason' = 'looks right' AND attributes->>'reviewer' = 'key:k-approve'`, id))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM reviews WHERE run_id = $1 AND decision = 'approve'`, id))

	// A second decision is a conflict.
	code, res = b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{"reason":"late"}`)
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "JOB_NOT_REVIEWABLE", res["code"])
}

func TestRejectNeedsReasonAndEndsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, res := b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"pay"}}`)
	id := res["jobId"].(string)
	approver := b.newKey(auth.RoleApprove)
	code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "VALIDATION_FAILED", res["code"])
	code, res = b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{"reason":"wrong account"}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, "rejected", res["status"])
	_, got := b.do(b.key, http.MethodGet, "/api/v1/dispatch/"+id, "")
	require.Equal(t, "rejected", got["status"])
	require.NotNil(t, got["timings"].(map[string]any)["finishedAt"])
}

func TestHighRiskScansForPII(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Clean payload: runs at once.
	code, res := b.dispatch(`{"job_type":"demo_high_risk","payload":{"prompt":"The parcel arrived late."}}`)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "queued", res["status"])

	secretEmail := "jane.doe@example.com"
	card := "4111 1111 1111 1111"
	code, res = b.dispatch(`{"job_type":"demo_high_risk","payload":{"prompt":"Refund them","customer":{"email":"` + secretEmail +
		`"},"notes":["card ` + card + `"]}}`)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "held_for_review", res["status"])
	raw, _ := json.Marshal(res)
	require.NotContains(t, string(raw), secretEmail, "the answer never repeats the matched value")
	require.NotContains(t, string(raw), "4111")
	got := map[string]string{}
	for _, r := range res["holdReasons"].([]any) {
		m := r.(map[string]any)
		got[m["detector"].(string)] = m["path"].(string)
	}
	require.Equal(t, map[string]string{"email": "$.customer.email", "credit_card": "$.notes[0]"}, got)
	id := res["jobId"].(string)
	require.Zero(t, b.count(`SELECT count(*) FROM spans WHERE run_id = $1 AND attributes::text LIKE '%jane%'`, id))
	require.Zero(t, b.count(`SELECT count(*) FROM run_events WHERE run_id = $1 AND data::text LIKE '%jane%'`, id))

	// Reviewers see the payload masked.
	approver := b.newKey(auth.RoleApprove)
	_, list := b.do(approver, http.MethodGet, "/api/v1/reviews", "")
	payload, _ := json.Marshal(list["items"].([]any)[0].(map[string]any)["payload"])
	require.NotContains(t, string(payload), secretEmail)
	require.Contains(t, string(payload), "[EMAIL]")

	// The organisation's own keywords hold too.
	_, err := b.pool.Exec(context.Background(), `UPDATE orgs SET pii_keywords = '{Project Falcon}' WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	waitFor(t, func() bool {
		_, res = b.dispatch(`{"job_type":"demo_high_risk","payload":{"prompt":"status of project falcon?"}}`)
		return res["status"] == "held_for_review"
	}, "keyword to hold")
	require.Equal(t, "keyword", res["holdReasons"].([]any)[0].(map[string]any)["detector"])
}

func TestQuotaExceeded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `UPDATE orgs SET monthly_token_quota = 1000 WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	testkit.Ledger(t, b.pool, `INSERT INTO usage_ledger (org_id, job_type, provider, model, tokens_in, tokens_out, cost_usd, latency_ms)
		VALUES ($1, 'demo_llm', 'sim-llm', 'sim-fast', 900, 300, 0.01, 5)`, b.orgID)
	var code int
	var res map[string]any
	waitFor(t, func() bool {
		code, res = b.dispatch(demo)
		return code == http.StatusTooManyRequests
	}, "quota to refuse")
	require.Equal(t, "QUOTA_EXCEEDED", res["code"])
	c := res["context"].(map[string]any)
	require.Equal(t, 1200.0, c["used"])
	require.Equal(t, 1000.0, c["limit"])
	top := c["top_skills"].([]any)
	require.Equal(t, "demo_llm", top[0].(map[string]any)["jobType"])
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(context.Background(), `UPDATE orgs SET user_rpm = 3 WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	body := `{"job_type":"demo_llm","user_id":"u-1","payload":{"prompt":"hi"}}`
	waitFor(t, func() bool {
		code, _ := b.dispatch(body)
		return code == http.StatusTooManyRequests
	}, "the user limit")
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, retry)
	var res map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
	require.Equal(t, "RATE_LIMITED", res["code"])
	c := res["context"].(map[string]any)
	require.Equal(t, "user", c["limit_scope"])
	require.Equal(t, 3.0, c["limit"])
	require.NotEmpty(t, c["reset_at"])
	require.Equal(t, "1m0s", c["window"])
	// Another user of the organisation is not limited.
	code, _ := b.dispatch(`{"job_type":"demo_llm","user_id":"u-2","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusAccepted, code)
}

func TestCancelQueuedHeldAndFinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, res := b.dispatch(demo)
	id := res["jobId"].(string)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch/"+id+"/cancel", "")
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, "cancelled", res["status"])
	_, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), id)
	require.ErrorIs(t, err, asynq.ErrTaskNotFound, "the task is removed from its queue")

	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch/"+id+"/cancel", "")
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "JOB_ALREADY_FINISHED", res["code"])

	_, res = b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"x"}}`)
	held := res["jobId"].(string)
	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch/"+held+"/cancel", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "cancelled", res["status"])

	// A running job is asked to stop: the state is set for the executor.
	_, res = b.dispatch(demo)
	running := res["jobId"].(string)
	_, err = runstore.New(b.pool).Claim(context.Background(), running)
	require.NoError(t, err)
	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch/"+running+"/cancel", "")
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, true, res["cancelRequested"])
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND cancel_requested_at IS NOT NULL`, running))
}

func TestBatchAnswersEachItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch/batch", `{"items":[
		{"job_type":"demo_llm","payload":{"prompt":"a"}},
		{"job_type":"nope","payload":{"prompt":"b"}},
		{"job_type":"demo_llm","payload":"not an object"},
		{"job_type":"demo_critical","payload":{"prompt":"c"}},
		{"job_type":"demo_us_only","payload":{"prompt":"d"}}]}`)
	require.Equal(t, http.StatusMultiStatus, code, "%v", res)
	require.Equal(t, 2.0, res["accepted"])
	require.Equal(t, 3.0, res["failed"])
	items := res["items"].([]any)
	status := func(i int) float64 { return items[i].(map[string]any)["status"].(float64) }
	errCode := func(i int) string { return items[i].(map[string]any)["error"].(map[string]any)["code"].(string) }
	require.Equal(t, 202.0, status(0))
	require.Equal(t, 404.0, status(1))
	require.Equal(t, "SKILL_NOT_FOUND", errCode(1))
	require.Equal(t, 400.0, status(2))
	require.Equal(t, "VALIDATION_FAILED", errCode(2))
	require.Equal(t, 202.0, status(3))
	require.Equal(t, "held_for_review", items[3].(map[string]any)["result"].(map[string]any)["status"])
	require.Equal(t, 403.0, status(4))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM runs WHERE batch_id = $1`, res["batchId"]))
}

func TestListRunsFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 5 {
		code, _ := b.dispatch(demo)
		require.Equal(t, http.StatusAccepted, code)
	}
	_, _ = b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"x"}}`)
	code, res := b.do(b.key, http.MethodGet, "/api/v1/dispatch?status=held_for_review", "")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, res["items"], 1)
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 5; page++ {
		path := "/api/v1/dispatch?job_type=demo_llm&limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, res = b.do(b.key, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, code, "%v", res)
		for _, it := range res["items"].([]any) {
			id := it.(map[string]any)["jobId"].(string)
			require.False(t, seen[id], "no run twice across pages")
			seen[id] = true
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, seen, 5)
	code, res = b.do(b.key, http.MethodGet, "/api/v1/dispatch?status=bogus", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "query.status", res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)["field"])
}

func TestSkillAdminAndNextDispatchUsesChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleSkillsAdmin, auth.RoleDispatch)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm","execution_type":"llm_only",
		"queue":"nowhere","risk_level":"extreme","max_tokens":0,"tools":["no_such_tool"]}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "VALIDATION_FAILED", res["code"])
	fields := map[string]string{}
	for _, f := range res["context"].(map[string]any)["fields"].([]any) {
		fields[f.(map[string]any)["field"].(string)] = f.(map[string]any)["rule"].(string)
	}
	require.Equal(t, "oneof", fields["risk_level"])

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm","execution_type":"llm_only",
		"queue":"nowhere","tools":["no_such_tool"]}`)
	require.Equal(t, http.StatusBadRequest, code)
	fields = map[string]string{}
	for _, f := range res["context"].(map[string]any)["fields"].([]any) {
		fields[f.(map[string]any)["field"].(string)] = f.(map[string]any)["rule"].(string)
	}
	require.Equal(t, map[string]string{"queue": "registered", "tools[0]": "registered"}, fields)

	code, res = b.do(admin, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm","execution_type":"llm_only",
		"system_prompt":"Answer like a pirate.","max_tokens":64,"routing_hint":"fast"}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	require.Equal(t, 2.0, res["version"])

	// The next dispatch is recorded with the new binding.
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code)
	_, got := b.do(admin, http.MethodGet, "/api/v1/dispatch/"+res["jobId"].(string), "")
	require.Equal(t, 2.0, got["skillVersion"])

	code, res = b.do(admin, http.MethodPost, "/api/v1/skills/demo_llm/disable", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, false, res["enabled"])
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusNotFound, code, "a disabled skill is refused at once")
	require.Equal(t, true, res["context"].(map[string]any)["disabled"])

	_, hist := b.do(b.key, http.MethodGet, "/api/v1/skills/demo_llm/history", "")
	actions := []string{}
	for _, h := range hist["items"].([]any) {
		m := h.(map[string]any)
		actions = append(actions, m["action"].(string)+" by "+m["changed_by"].(string))
	}
	require.Equal(t, []string{"disable by key:k-skills_admin", "update by key:k-skills_admin", "create by test"}, actions)

	// Viewers and dispatchers cannot change bindings.
	code, _ = b.do(b.key, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm","execution_type":"llm_only"}`)
	require.Equal(t, http.StatusForbidden, code)
}

func TestReconcilerRequeuesStrandedRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, res := b.dispatch(demo)
	id := res["jobId"].(string)
	tier := queue.Tier("default", run.PriorityNormal)
	// Simulate the crash window (or lost Redis data): the run is queued, its task is gone.
	require.NoError(t, b.inspector.DeleteTask(tier, id))
	_, err := b.pool.Exec(context.Background(), `UPDATE runs SET updated_at = now() - interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)
	n, err := b.app.Reconciler.Once(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = b.inspector.GetTaskInfo(tier, id)
	require.NoError(t, err, "the task is back")
	n, err = b.app.Reconciler.Once(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a run with its task is left alone")
}

func TestCallbackSignedAndDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var got atomic.Value
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hits.Add(1)
		got.Store([]string{r.Header.Get(callback.HeaderTimestamp), r.Header.Get(callback.HeaderSignature), string(body)})
	}))
	defer hook.Close()

	// Loopback is refused until the organisation allowlists it.
	code, res := b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"x"},"callback_url":"` + hook.URL + `/hook"}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "CALLBACK_URL_FORBIDDEN", res["code"])
	require.Equal(t, "loopback", res["context"].(map[string]any)["reason"])

	_, err := b.pool.Exec(context.Background(), `UPDATE orgs SET callback_allowlist = '{127.0.0.1}' WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	waitFor(t, func() bool {
		code, res = b.dispatch(`{"job_type":"demo_critical","payload":{"prompt":"x"},"callback_url":"` + hook.URL + `/hook"}`)
		return code == http.StatusAccepted
	}, "the allowlist to apply")
	id := res["jobId"].(string)
	approver := b.newKey(auth.RoleApprove)
	code, _ = b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{"reason":"no"}`)
	require.Equal(t, http.StatusOK, code)

	waitFor(t, func() bool { return hits.Load() > 0 }, "the callback")
	v := got.Load().([]string)
	ts, err := strconv.ParseInt(v[0], 10, 64)
	require.NoError(t, err)
	var secret string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT callback_secret FROM orgs WHERE id = $1`, b.orgID).Scan(&secret))
	require.True(t, callback.Verify(secret, ts, []byte(v[2]), v[1], time.Minute, time.Now()), "signature verifies")
	require.False(t, callback.Verify("other-secret", ts, []byte(v[2]), v[1], time.Minute, time.Now()))
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(v[2]), &body))
	require.Equal(t, id, body["jobId"])
	require.Equal(t, "rejected", body["status"])
	waitFor(t, func() bool {
		return b.count(`SELECT count(*) FROM runs WHERE id = $1 AND callback_status = 'delivered'`, id) == 1
	}, "delivery to be recorded")
	require.Equal(t, int32(1), hits.Load(), "delivered once")
}

func TestUnknownJobIsNotFoundEverywhere(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := uuid.NewString()
	approver := b.newKey(auth.RoleApprove, auth.RoleDispatch)
	for _, path := range []string{"/cancel", "/approve", "/reject"} {
		code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+path, `{"reason":"x"}`)
		require.Equal(t, http.StatusNotFound, code, path)
		require.Equal(t, "JOB_NOT_FOUND", res["code"], fmt.Sprint(path))
	}
}

// TestApprovePausedRunReplacesItsFinishedTask covers a run paused mid-way for review whose
// finished task is still kept in Redis (task retention): approving it must put a new task
// on the queue, not be swallowed by the old task's id.
func TestApprovePausedRunReplacesItsFinishedTask(t *testing.T) {
	t.Parallel()
	b := setupWith(t, app.Options{TaskRetention: time.Hour})
	_, res := b.dispatch(demo)
	id := res["jobId"].(string)
	tier := queue.Tier("default", run.PriorityNormal)

	// A worker takes the task and pauses the run for review, finishing its task.
	opt := asynq.RedisClientOpt{Addr: b.rdb.Options().Addr, DB: b.rdb.Options().DB}
	done := make(chan struct{})
	srv := asynq.NewServer(opt, asynq.Config{Queues: map[string]int{tier: 1}, TaskCheckInterval: 10 * time.Millisecond,
		Logger: quietLogger{}})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		if _, err := runstore.New(b.pool).Claim(ctx, id); err != nil {
			return err
		}
		_, err := runstore.New(b.pool).Transition(ctx, id, nil, run.PendingReview, runstore.Change{})
		close(done)
		return err
	})))
	<-done
	waitFor(t, func() bool {
		info, err := b.inspector.GetTaskInfo(tier, id)
		return err == nil && info.State == asynq.TaskStateCompleted
	}, "the task to complete")
	srv.Shutdown()

	approver := b.newKey(auth.RoleApprove)
	code, res := b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"go on"}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	info, err := b.inspector.GetTaskInfo(tier, id)
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State, "a new task waits for an executor")
}

type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(...any) {}
