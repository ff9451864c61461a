package api_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/session"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

type bundle struct {
	t         testing.TB
	srv       *httptest.Server
	app       *app.App
	pool      *pgxpool.Pool
	rdb       *redis.Client
	inspector *asynq.Inspector
	asynqOpt  asynq.RedisConnOpt
	orgID     string
	key       string
}

func setup(t *testing.T) *bundle { return setupWith(t, app.Options{}) }

// setupWith is setup with some app options set (DB, Redis, Asynq and Log are filled in).
func setupWith(t testing.TB, o app.Options) *bundle {
	t.Helper()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	redisURL, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(redisURL)
	require.NoError(t, err)
	inspector := asynq.NewInspector(opt)
	t.Cleanup(func() { inspector.Close() })

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	orgID, err := bootstrap.EnsureOrg(ctx, pool, "acme", "Acme", "eu")
	require.NoError(t, err)
	key, _, err := auth.Create(ctx, pool, orgID, "test", []auth.Role{auth.RoleDispatch, auth.RoleViewer}, "test")
	require.NoError(t, err)
	_, err = bootstrap.LoadSkills(ctx, pool, orgID, filepath.Join("..", "..", "..", "skills"), "test")
	require.NoError(t, err)

	o.DB, o.Redis, o.Asynq, o.Log = pool, rdb, opt, log
	o.ReconcileEvery = cmp.Or(o.ReconcileEvery, time.Hour)
	o.CallbackEvery = cmp.Or(o.CallbackEvery, 20*time.Millisecond)
	a := app.New(o)
	a.Start(ctx)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Stop()
	})
	waitFor(t, a.Registry.Live, "registry cache to follow changes")
	return &bundle{t: t, srv: srv, app: a, pool: pool, rdb: rdb, inspector: inspector, asynqOpt: opt, orgID: orgID, key: key}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t testing.TB, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newKey creates another key of the bundle's organisation with the given roles.
func (b *bundle) newKey(roles ...auth.Role) string {
	b.t.Helper()
	k, _, err := auth.Create(context.Background(), b.pool, b.orgID, "k-"+string(roles[0]), roles, "test")
	require.NoError(b.t, err)
	return k
}

func (b *bundle) do(key, method, path, body string) (int, map[string]any) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(b.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		require.NoError(b.t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, out
}

const demo = `{"job_type":"demo_llm","payload":{"prompt":"hi"}}`

func TestDispatchRecordsAndEnqueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"demo_llm","priority":"high",
		"user_id":"u1","payload":{"prompt":"hi"},"metadata":{"source_service":"crm","correlation_id":"c-1"}}`)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	id := res["jobId"].(string)

	// The task is on the named queue's high tier, under the run's id.
	info, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityHigh), id)
	require.NoError(t, err)
	require.Equal(t, queue.TypeRun, info.Type)

	code, got := b.do(b.key, http.MethodGet, "/api/v1/dispatch/"+id, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "queued", got["status"])
	require.Equal(t, "high", got["priority"])
	require.Equal(t, "u1", got["userId"])
	require.Equal(t, "crm", got["metadata"].(map[string]any)["source_service"])
	require.Nil(t, got["payload"], "the payload is not echoed back")

	code, spans := b.do(b.key, http.MethodGet, "/api/v1/dispatch/"+id+"/spans", "")
	require.Equal(t, http.StatusOK, code)
	tree := spans["tree"].([]any)
	require.Len(t, tree, 1, "one tree")
	root := tree[0].(map[string]any)
	require.Equal(t, "dispatch", root["type"])
	children := root["children"].([]any)
	require.Len(t, children, 1, "one governance_check span records the decision")
	gov := children[0].(map[string]any)
	require.Equal(t, "governance_check", gov["type"])
	attrs := gov["attributes"].(map[string]any)
	require.Equal(t, "pass", attrs["outcome"])
	checks := map[string]string{}
	for _, ch := range attrs["checks"].([]any) {
		c := ch.(map[string]any)
		checks[c["check"].(string)] = c["outcome"].(string)
	}
	require.Equal(t, map[string]string{"residency": "pass", "risk": "pass"}, checks)

	var seq int64
	var typ string
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT seq, type FROM run_events WHERE run_id = $1`, id).Scan(&seq, &typ))
	require.Equal(t, int64(1), seq)
	require.Equal(t, "job:queued", typ)
}

func TestDispatchValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name, body string
		fields     map[string]string // field -> rule
	}{
		{"missing job type and payload", `{}`, map[string]string{"job_type": "required", "payload": "required"}},
		{"bad priority and callback", `{"job_type":"demo_llm","payload":{},"priority":"urgent","callback_url":"ftp://x"}`,
			map[string]string{"priority": "oneof", "callback_url": "httpurl"}},
		{"payload not an object", `{"job_type":"demo_llm","payload":"text"}`, map[string]string{"payload": "type"}},
		{"unknown field", `{"job_type":"demo_llm","payload":{},"colour":"red"}`, map[string]string{"colour": "unknown_field"}},
		{"wrong type", `{"job_type":7,"payload":{}}`, map[string]string{"job_type": "type"}},
		{"bad job type", `{"job_type":"Demo LLM","payload":{}}`, map[string]string{"job_type": "jobtype"}},
		{"bad parent id", `{"job_type":"demo_llm","payload":{},"metadata":{"parent_job_id":"x"}}`,
			map[string]string{"metadata.parent_job_id": "uuid"}},
		{"not json", `{"job_type":`, map[string]string{"$": "json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", tc.body)
			require.Equal(t, http.StatusBadRequest, code, "%v", res)
			require.Equal(t, "VALIDATION_FAILED", res["code"])
			got := map[string]string{}
			for _, f := range res["context"].(map[string]any)["fields"].([]any) {
				m := f.(map[string]any)
				got[m["field"].(string)] = m["rule"].(string)
			}
			require.Equal(t, tc.fields, got)
		})
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&n))
	require.Zero(t, n, "nothing is recorded for a bad request")
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do("", http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "UNAUTHENTICATED", res["code"])
	code, _ = b.do("sy_000000000000_"+strings.Repeat("0", 48), http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusUnauthorized, code)
	// The right prefix with a wrong secret is refused too.
	prefix, err := auth.Parse(b.key)
	require.NoError(t, err)
	code, _ = b.do("sy_"+prefix+"_"+strings.Repeat("f", 48), http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusUnauthorized, code)

	viewer, _, err := auth.Create(context.Background(), b.pool, b.orgID, "viewer", []auth.Role{auth.RoleViewer}, "test")
	require.NoError(t, err)
	code, res = b.do(viewer, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "FORBIDDEN", res["code"])
}

func TestOrganisationIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code)
	id := res["jobId"].(string)

	other, err := bootstrap.EnsureOrg(context.Background(), b.pool, "globex", "Globex", "us")
	require.NoError(t, err)
	otherKey, _, err := auth.Create(context.Background(), b.pool, other, "k", []auth.Role{auth.RoleAdmin}, "test")
	require.NoError(t, err)

	codeOther, resOther := b.do(otherKey, http.MethodGet, "/api/v1/dispatch/"+id, "")
	codeMissing, resMissing := b.do(otherKey, http.MethodGet, "/api/v1/dispatch/00000000-0000-0000-0000-000000000000", "")
	require.Equal(t, http.StatusNotFound, codeOther)
	require.Equal(t, codeMissing, codeOther)
	require.Equal(t, resMissing["code"], resOther["code"])
	code, _ = b.do(otherKey, http.MethodGet, "/api/v1/dispatch/"+id+"/spans", "")
	require.Equal(t, http.StatusNotFound, code)
	// The other organisation has no skills: its dispatch of the same job type is refused.
	code, res = b.do(otherKey, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "SKILL_NOT_FOUND", res["code"])
}

func TestIdempotencyUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"job_type":"demo_llm","payload":{"prompt":"hi"},"idempotency_key":"order-42"}`
	const n = 16
	ids := make([]string, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+b.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			codes[i] = resp.StatusCode
			ids[i], _ = out["jobId"].(string)
		})
	}
	wg.Wait()
	accepted := 0
	for i := range n {
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, codes[i])
		require.Equal(t, ids[0], ids[i])
		if codes[i] == http.StatusAccepted {
			accepted++
		}
	}
	require.Equal(t, 1, accepted, "exactly one request creates the run")
	var runs int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM runs`).Scan(&runs))
	require.Equal(t, 1, runs)
	var spans, events int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM spans WHERE type = 'dispatch'`).Scan(&spans))
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM run_events`).Scan(&events))
	require.Equal(t, 1, spans, "the losers wrote nothing: their batch was one transaction")
	require.Equal(t, 1, events)
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do("", http.MethodGet, "/readyz", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready", res["status"])
	code, _ = b.do("", http.MethodGet, "/healthz", "")
	require.Equal(t, http.StatusOK, code)
	code, res = b.do(b.key, http.MethodGet, "/api/v1/nope", "")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "ROUTE_NOT_FOUND", res["code"])
}

func TestBrowserSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	post := func(path, body string) *http.Response {
		resp, err := browser.Post(b.srv.URL+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		return resp
	}

	resp := post("/api/v1/session", `{"api_key":"sy_000000000000_`+strings.Repeat("0", 48)+`"}`)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	resp = post("/api/v1/session", `{"api_key":"`+b.key+`"}`)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == session.CookieName {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	require.NotContains(t, cookie.Value, b.key)

	// The cookie alone authenticates API calls.
	resp = post("/api/v1/dispatch", demo)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// Revoking the key ends the session.
	prefix, _ := auth.Parse(b.key)
	_, err = b.pool.Exec(context.Background(), `UPDATE api_keys SET revoked_at = now() WHERE prefix = $1`, prefix)
	require.NoError(t, err)
	r, err := browser.Get(b.srv.URL + "/api/v1/session")
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusUnauthorized, r.StatusCode)
}
