package api_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// operatorKey creates a platform operator key.
func (b *bundle) operatorKey() string {
	b.t.Helper()
	k, _, err := auth.CreateOperator(context.Background(), b.pool, "ops", "test")
	require.NoError(b.t, err)
	return k
}

// newOrg creates an organisation through the operator API, issues its first admin key and
// loads the skill catalogue into it; it returns the org's id and the admin key.
func (b *bundle) newOrg(op, slug string) (string, string) {
	b.t.Helper()
	code, o := b.do(op, http.MethodPost, "/api/v1/operator/orgs",
		`{"slug":"`+slug+`","name":"Beta","jurisdiction":"eu","monthlyCostBudgetUsd":25.5,"orgRpm":100}`)
	require.Equal(b.t, http.StatusCreated, code, "%v", o)
	id := o["id"].(string)
	code, k := b.do(op, http.MethodPost, "/api/v1/operator/orgs/"+slug+"/admin-keys", "")
	require.Equal(b.t, http.StatusCreated, code, "%v", k)
	_, err := bootstrap.LoadSkills(context.Background(), b.pool, id, filepath.Join("..", "..", "..", "skills"), "test")
	require.NoError(b.t, err)
	return id, k["key"].(string)
}

func requireCode(t *testing.T, wantStatus int, wantCode string, status int, body map[string]any) {
	t.Helper()
	require.Equal(t, wantStatus, status, "%v", body)
	require.Equal(t, wantCode, body["code"], "%v", body)
}

func TestOperatorCreatesSuspendsAndResumesAnOrganisation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorKey()
	id, admin := b.newOrg(op, "beta")

	code, o := b.do(op, http.MethodGet, "/api/v1/operator/orgs/"+id, "")
	require.Equal(t, http.StatusOK, code, "%v", o)
	require.Equal(t, "beta", o["slug"])
	require.Equal(t, "eu", o["jurisdiction"])
	require.EqualValues(t, 25.5, o["monthlyCostBudgetUsd"])
	require.EqualValues(t, 100, o["orgRpm"])
	require.EqualValues(t, 600, o["userRpm"], "unset limits take the defaults")
	require.Nil(t, o["suspendedAt"])

	code, l := b.do(op, http.MethodGet, "/api/v1/operator/orgs", "")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, l["items"], 2, "acme and beta")

	// The new admin key is an admin of beta only.
	code, me := b.do(admin, http.MethodGet, "/api/v1/admin/org", "")
	require.Equal(t, http.StatusOK, code, "%v", me)
	require.Equal(t, id, me["id"])
	code, res := b.do(admin, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_critical","payload":{"prompt":"hi"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	held := res["jobId"].(string)

	// Suspended: every kind of dispatch answers 403 ORG_SUSPENDED, and nothing is written.
	code, s := b.do(op, http.MethodPost, "/api/v1/operator/orgs/beta/suspend", `{"reason":"unpaid invoice"}`)
	require.Equal(t, http.StatusOK, code, "%v", s)
	org := s["org"].(map[string]any)
	require.NotNil(t, org["suspendedAt"])
	require.Equal(t, "key:ops", org["suspendedBy"])
	require.Equal(t, "unpaid invoice", org["suspendReason"])
	var before int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE org_id = $1`, id).Scan(&before))

	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", demo)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	require.Equal(t, "unpaid invoice", res["context"].(map[string]any)["reason"])
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch/batch", `{"items":[`+demo+`]}`)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_research","payload":{"topic":"otters"}}`)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	code, res = b.do(admin, http.MethodPost, "/api/v1/workflows/run", `{"workflow":"name: w\non: workflow_dispatch\njobs:\n  a:\n    runs-on: cpu\n    steps:\n      - uses: ./skills/demo_llm\n        with:\n          prompt: hi\n"}`)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch/"+held+"/approve", `{"reason":"ok"}`)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	var after int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE org_id = $1`, id).Scan(&after))
	require.Equal(t, before, after, "a refused dispatch writes no run")

	// Reading still works; the other organisation is untouched.
	code, _ = b.do(admin, http.MethodGet, "/api/v1/dispatch", "")
	require.Equal(t, http.StatusOK, code)
	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)

	code, o = b.do(op, http.MethodPost, "/api/v1/operator/orgs/beta/resume", "")
	require.Equal(t, http.StatusOK, code, "%v", o)
	require.Nil(t, o["suspendedAt"])
	code, res = b.do(admin, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)

	// The audit says who did what, and when.
	code, o = b.do(op, http.MethodGet, "/api/v1/operator/orgs/beta", "")
	require.Equal(t, http.StatusOK, code)
	var actions []string
	for _, e := range o["audit"].([]any) {
		e := e.(map[string]any)
		actions = append(actions, e["action"].(string))
		require.Equal(t, "key:ops", e["actor"])
		require.NotEmpty(t, e["at"])
	}
	require.Equal(t, []string{"create", "admin_key", "suspend", "resume"}, actions)
	require.Equal(t, "unpaid invoice", o["audit"].([]any)[2].(map[string]any)["reason"])
}

func TestOperatorSetsLimitsAndBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorKey()

	code, res := b.do(op, http.MethodPost, "/api/v1/operator/orgs", `{"slug":"Bad Slug","name":"","jurisdiction":"mars","orgRpm":-1}`)
	requireCode(t, http.StatusBadRequest, "VALIDATION_FAILED", code, res)
	var fields []string
	for _, f := range res["context"].(map[string]any)["fields"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	require.ElementsMatch(t, []string{"slug", "name", "jurisdiction", "orgRpm"}, fields)
	code, res = b.do(op, http.MethodPost, "/api/v1/operator/orgs", `{"slug":"acme","name":"Again","jurisdiction":"us"}`)
	requireCode(t, http.StatusConflict, "ORG_EXISTS", code, res)
	code, res = b.do(op, http.MethodGet, "/api/v1/operator/orgs/nope", "")
	requireCode(t, http.StatusNotFound, "ORG_NOT_FOUND", code, res)
	code, res = b.do(op, http.MethodPost, "/api/v1/operator/orgs/acme/suspend", `{}`)
	requireCode(t, http.StatusBadRequest, "VALIDATION_FAILED", code, res)
	require.Contains(t, res["context"].(map[string]any)["fields"].([]any)[0].(map[string]any)["field"], "reason")

	code, res = b.do(op, http.MethodPatch, "/api/v1/operator/orgs/acme", `{"monthlyCostBudgetUsd":-2,"jurisdiction":"moon"}`)
	requireCode(t, http.StatusBadRequest, "VALIDATION_FAILED", code, res)
	require.Len(t, res["context"].(map[string]any)["fields"], 2)
	code, o := b.do(op, http.MethodGet, "/api/v1/operator/orgs/acme", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "eu", o["jurisdiction"], "a refused patch changes nothing")

	code, o = b.do(op, http.MethodPatch, "/api/v1/operator/orgs/acme",
		`{"jurisdiction":"us","monthlyTokenQuota":5000,"monthlyCostBudgetUsd":0,"maxBacklog":7}`)
	require.Equal(t, http.StatusOK, code, "%v", o)
	require.Equal(t, "us", o["jurisdiction"])
	require.EqualValues(t, 5000, o["monthlyTokenQuota"])
	require.EqualValues(t, 7, o["maxBacklog"])

	// A spent budget (0 of 0) stops dispatching at once on this replica.
	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	requireCode(t, http.StatusTooManyRequests, "COST_BUDGET_EXCEEDED", code, res)
	code, o = b.do(op, http.MethodPatch, "/api/v1/operator/orgs/acme", `{"clearCostBudget":true}`)
	require.Equal(t, http.StatusOK, code, "%v", o)
	require.Nil(t, o["monthlyCostBudgetUsd"])
	code, res = b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
}

func TestOperatorAndOrgRolesDoNotMix(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorKey()
	admin := b.newKey(auth.RoleAdmin)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	job := res["jobId"].(string)

	// An operator key reads no organisation's runs, skills or settings, and dispatches nothing.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/dispatch", ""},
		{http.MethodGet, "/api/v1/dispatch/" + job, ""},
		{http.MethodGet, "/api/v1/dispatch/" + job + "/spans", ""},
		{http.MethodGet, "/api/v1/dispatch/" + job + "/events", ""},
		{http.MethodPost, "/api/v1/dispatch/" + job + "/cancel", ""},
		{http.MethodPost, "/api/v1/dispatch", demo},
		{http.MethodGet, "/api/v1/chains", ""},
		{http.MethodGet, "/api/v1/reviews", ""},
		{http.MethodGet, "/api/v1/skills", ""},
		{http.MethodGet, "/api/v1/admin/org", ""},
		{http.MethodGet, "/api/v1/admin/keys", ""},
		{http.MethodGet, "/api/v1/admin/usage", ""},
		{http.MethodGet, "/api/v1/stream?job_id=" + job, ""},
	} {
		code, res := b.do(op, r.method, r.path, r.body)
		requireCode(t, http.StatusForbidden, "FORBIDDEN", code, res)
	}
	// An organisation's admin is no operator.
	for _, key := range []string{admin, b.key} {
		code, res := b.do(key, http.MethodGet, "/api/v1/operator/orgs", "")
		requireCode(t, http.StatusForbidden, "FORBIDDEN", code, res)
		code, res = b.do(key, http.MethodPost, "/api/v1/operator/orgs/acme/suspend", `{"reason":"x"}`)
		requireCode(t, http.StatusForbidden, "FORBIDDEN", code, res)
	}
	// Nor can an admin make a key with the operator role.
	code, res = b.do(admin, http.MethodPost, "/api/v1/admin/keys", `{"name":"x","roles":["operator"]}`)
	requireCode(t, http.StatusBadRequest, "VALIDATION_FAILED", code, res)
}

// TestSuspendStopsQueuedHeldAndRunningWork: suspension cancels queued runs (their tasks
// leave Redis), held runs and chains, and asks running runs to stop at their next step.
func TestSuspendStopsQueuedHeldAndRunningWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	op := b.operatorKey()
	dispatch := func(body string) string {
		code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", body)
		require.Equal(t, http.StatusAccepted, code, "%v", res)
		return res["jobId"].(string)
	}
	queued := dispatch(demo)
	held := dispatch(`{"job_type":"demo_critical","payload":{"prompt":"hi"}}`)
	running := dispatch(demo)
	chainParent := dispatch(`{"job_type":"demo_research","payload":{"topic":"otters"}}`)
	// The coordinator starts a chain after the 202; one started after the suspension would
	// fail its root step with ORG_SUSPENDED instead (a truthful end, but not this test's).
	waitFor(t, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM chain_steps s JOIN runs r ON r.chain_id = s.chain_id
			WHERE r.id = $1 AND s.status = 'dispatched'`, chainParent).Scan(&n))
		return n > 0
	}, "the chain's roots to be dispatched")
	// An executor picks one up.
	_, err := runstore.New(b.pool).Claim(ctx, running)
	require.NoError(t, err)
	_, err = b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), queued)
	require.NoError(t, err)

	code, s := b.do(op, http.MethodPost, "/api/v1/operator/orgs/acme/suspend", `{"reason":"incident 42"}`)
	require.Equal(t, http.StatusOK, code, "%v", s)
	require.EqualValues(t, 1, s["cancelRequested"], "%v", s)

	status := func(id string) string {
		var st string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT status FROM runs WHERE id = $1`, id).Scan(&st))
		return st
	}
	require.Equal(t, "cancelled", status(queued))
	require.Equal(t, "cancelled", status(held))
	require.Equal(t, "running", status(running), "no executor here: the run ends when one sees the request")
	var requested bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT cancel_requested_at IS NOT NULL FROM runs WHERE id = $1`, running).Scan(&requested))
	require.True(t, requested, "the executor is asked to stop")
	_, err = b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), queued)
	require.Error(t, err, "the cancelled run's task left its queue")
	var chainStatus string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT c.status FROM chains c JOIN runs r ON r.chain_id = c.id WHERE r.id = $1`,
		chainParent).Scan(&chainStatus))
	require.Equal(t, "cancelled", chainStatus)
	var live int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE org_id = $1
		AND status IN ('queued', 'held_for_review', 'pending_review')`, b.orgID).Scan(&live))
	require.Zero(t, live, "nothing is left waiting to run")
	require.GreaterOrEqual(t, s["cancelled"], float64(3), "%v", s)

	// Suspending again repeats the sweep and keeps the first suspension's record.
	code, s2 := b.do(op, http.MethodPost, "/api/v1/operator/orgs/acme/suspend", `{"reason":"again"}`)
	require.Equal(t, http.StatusOK, code, "%v", s2)
	require.Equal(t, "incident 42", s2["org"].(map[string]any)["suspendReason"])
	require.EqualValues(t, 0, s2["cancelled"])
}

// TestSuspensionReachesAnotherReplicaAtOnce: a second dispatcher on the same Postgres and
// Redis, whose cache holds the organisation, refuses its next dispatch once the
// suspension's notification has arrived — no TTL to wait out.
func TestSuspensionReachesAnotherReplicaAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorKey()
	a2 := app.New(app.Options{DB: b.pool, Redis: b.rdb, Asynq: b.asynqOpt, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ReconcileEvery: time.Hour, CallbackEvery: time.Hour})
	a2.Start(context.Background())
	srv2 := httptest.NewServer(a2.Handler())
	t.Cleanup(func() {
		srv2.Close()
		a2.Stop()
	})
	waitFor(t, a2.Registry.Live, "replica 2's cache to follow changes")
	b2 := &bundle{t: t, srv: srv2, pool: b.pool}

	code, res := b2.do(b.key, http.MethodPost, "/api/v1/dispatch", demo) // replica 2 caches the org
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	// onReplica1 sends a request to replica 1 and waits until replica 2 has heard of a change.
	onReplica1 := func(path, body string) {
		changed := a2.Registry.Changed()
		code, res := b.do(op, http.MethodPost, path, body)
		require.Equal(t, http.StatusOK, code, "%v", res)
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatal("replica 2 heard no registry change")
		}
	}
	onReplica1("/api/v1/operator/orgs/acme/suspend", `{"reason":"stop"}`)
	code, res = b2.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	requireCode(t, http.StatusForbidden, "ORG_SUSPENDED", code, res)
	onReplica1("/api/v1/operator/orgs/acme/resume", "")
	code, res = b2.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
}

// TestOperatorKeysAreManagedWithoutSQL: an operator makes another operator key, lists the
// operator keys (no organisation's among them) and revokes a leaked one, which stops
// working at once; neither an operator nor an organisation's admin reaches the other's keys.
func TestOperatorKeysAreManagedWithoutSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	op := b.operatorKey()
	_, admin := b.newOrg(op, "gamma")

	code, res := b.do(op, http.MethodPost, "/api/v1/operator/keys", `{"name":"ops-2"}`)
	require.Equal(t, http.StatusCreated, code, "%v", res)
	op2 := res["key"].(string)
	require.Equal(t, []any{"operator"}, res["info"].(map[string]any)["roles"])
	code, res = b.do(op, http.MethodPost, "/api/v1/operator/keys", `{}`)
	_, msgs := fields(t, code, res)
	require.Contains(t, msgs, "name")

	code, res = b.do(op2, http.MethodGet, "/api/v1/operator/keys", "")
	require.Equal(t, http.StatusOK, code, "%v", res)
	items := res["items"].([]any)
	require.Len(t, items, 2, "the two operator keys and no organisation's: %v", items)
	var leakedID string
	for _, it := range items {
		k := it.(map[string]any)
		require.Equal(t, []any{"operator"}, k["roles"])
		if k["name"] == "ops" {
			leakedID = k["id"].(string)
		}
	}
	require.NotEmpty(t, leakedID)

	// An organisation's admin cannot revoke an operator key, nor an operator an admin's.
	code, res = b.do(admin, http.MethodDelete, "/api/v1/admin/keys/"+leakedID, "")
	requireCode(t, http.StatusNotFound, "KEY_NOT_FOUND", code, res)
	code, res = b.do(admin, http.MethodGet, "/api/v1/admin/keys", "")
	require.Equal(t, http.StatusOK, code, "%v", res)
	adminKeyID := res["items"].([]any)[0].(map[string]any)["id"].(string)
	code, res = b.do(op2, http.MethodDelete, "/api/v1/operator/keys/"+adminKeyID, "")
	requireCode(t, http.StatusNotFound, "KEY_NOT_FOUND", code, res)

	code, _ = b.do(op2, http.MethodDelete, "/api/v1/operator/keys/"+leakedID, "")
	require.Equal(t, http.StatusNoContent, code)
	code, res = b.do(op, http.MethodGet, "/api/v1/operator/orgs", "")
	requireCode(t, http.StatusUnauthorized, "UNAUTHENTICATED", code, res)
	code, _ = b.do(op2, http.MethodGet, "/api/v1/operator/orgs", "")
	require.Equal(t, http.StatusOK, code)
}
