package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
)

func (b *bundle) wsURL(query string) string {
	return "ws" + strings.TrimPrefix(b.srv.URL, "http") + "/api/v1/stream?" + query
}

// dialStream connects with the given headers; on a refused upgrade it returns the status
// and the error body's code.
func (b *bundle) dialStream(query string, h http.Header) (*websocket.Conn, int, string) {
	b.t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(b.wsURL(query), h)
	if err == nil {
		b.t.Cleanup(func() { ws.Close() })
		resp.Body.Close()
		return ws, resp.StatusCode, ""
	}
	require.NotNil(b.t, resp, "dial: %v", err)
	defer resp.Body.Close()
	var body struct {
		Code string `json:"code"`
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return nil, resp.StatusCode, body.Code
}

func bearer(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} }

type wsMsg struct {
	Type  string `json:"type"`
	JobID string `json:"job_id"`
	Seq   int64  `json:"seq"`
	Code  string `json:"code"`
}

func readMsg(t *testing.T, ws *websocket.Conn) wsMsg {
	t.Helper()
	require.NoError(t, ws.SetReadDeadline(time.Now().Add(10*time.Second)))
	var m wsMsg
	require.NoError(t, ws.ReadJSON(&m))
	return m
}

func TestStreamWithSessionCookieReplaysTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	jobID := res["jobId"].(string)

	// A browser: the session cookie, and an Origin that matches the host.
	resp, err := http.Post(b.srv.URL+"/api/v1/session", "application/json",
		strings.NewReader(`{"api_key":"`+b.key+`"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cookie := resp.Cookies()[0]
	h := http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}, "Origin": {b.srv.URL}}
	ws, _, _ := b.dialStream("job_id="+jobID, h)
	require.NotNil(t, ws)
	m := readMsg(t, ws)
	require.Equal(t, "job:queued", m.Type)
	require.Equal(t, jobID, m.JobID)
	require.Equal(t, int64(1), m.Seq)
	require.Equal(t, "stream:subscribed", readMsg(t, ws).Type)

	// Another site's page cannot use the cookie.
	h.Set("Origin", "https://evil.example")
	ws, code, _ = b.dialStream("job_id="+jobID, h)
	require.Nil(t, ws)
	require.Equal(t, http.StatusForbidden, code)
}

func TestStreamRefusesBeforeTheUpgrade(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dispatchOnly := b.newKey(auth.RoleDispatch)
	for _, tc := range []struct {
		name, query string
		h           http.Header
		status      int
		code        string
	}{
		{"no key", "scope=org", nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"key in the URL is not a key", "scope=org&token=" + b.key, nil, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"org stream without viewer", "scope=org", bearer(dispatchOnly), http.StatusForbidden, "FORBIDDEN"},
		{"malformed job id", "job_id=nope", bearer(b.key), http.StatusBadRequest, "VALIDATION_FAILED"},
		{"negative after_seq", "job_id=7d4a0f3c-3e0b-4f7e-9a55-0f1c2d3e4f50&after_seq=-1", bearer(b.key), http.StatusBadRequest, "VALIDATION_FAILED"},
		{"unknown job", "job_id=7d4a0f3c-3e0b-4f7e-9a55-0f1c2d3e4f50", bearer(b.key), http.StatusNotFound, "JOB_NOT_FOUND"},
		{"unknown chain", "chain_id=7d4a0f3c-3e0b-4f7e-9a55-0f1c2d3e4f50", bearer(b.key), http.StatusNotFound, "CHAIN_NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, status, code := b.dialStream(tc.query, tc.h)
			require.Nil(t, ws)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.code, code)
		})
	}
	code, res := b.do(b.key, http.MethodGet, "/api/v1/stream?scope=org", "")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "WEBSOCKET_REQUIRED", res["code"])
}

func TestOrgStreamRelaysDispatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ws, _, _ := b.dialStream("scope=org", bearer(b.key))
	require.NotNil(t, ws)
	require.Equal(t, "stream:subscribed", readMsg(t, ws).Type)
	code, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	m := readMsg(t, ws)
	require.Equal(t, "job:queued", m.Type)
	require.Equal(t, res["jobId"], m.JobID)
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(raw)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, _ := b.do(b.key, http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = b.do("", http.MethodPost, "/api/v1/dispatch", demo)
	require.Equal(t, http.StatusUnauthorized, code)
	ws, _, _ := b.dialStream("scope=org", bearer(b.key))
	require.NotNil(t, ws)
	readMsg(t, ws)

	m := scrape(t, b.srv.URL)
	require.Contains(t, m, `switchyard_dispatcher_requests_total{code="202",method="POST",route="/api/v1/dispatch"} 1`)
	require.Contains(t, m, `switchyard_dispatcher_requests_total{code="401",method="POST",route="/api/v1/dispatch"} 1`)
	require.Contains(t, m, `switchyard_dispatcher_request_duration_seconds_count{method="POST",route="/api/v1/dispatch"} 2`)
	// No executor consumes in this test: the job waits in the default queue's normal tier.
	require.Contains(t, m, `switchyard_queue_depth{priority="normal",queue="default",state="pending"} 1`)
	require.Contains(t, m, `switchyard_queue_depth{priority="high",queue="default",state="pending"} 0`)
	require.Contains(t, m, `switchyard_queue_oldest_pending_age_seconds{priority="normal",queue="default"}`)
	// The coordinator's queues are reported whether or not they ever held a task.
	require.Regexp(t, `switchyard_coordinator_queue_depth\{queue="coordinator_starts",state="pending"\} \d+\n`, m)
	require.Regexp(t, `switchyard_coordinator_queue_depth\{queue="coordinator",state="active"\} \d+\n`, m)
	require.Contains(t, m, `switchyard_coordinator_oldest_pending_age_seconds{queue="coordinator_starts"}`)
	require.Contains(t, m, "switchyard_stream_clients 1")
	require.Contains(t, m, "switchyard_stream_dropped_clients_total 0")
	require.Contains(t, m, "switchyard_stream_redis_subscriptions 1")
}

// The UI tests set SWITCHYARD_WEB_DIR, so they cannot run in parallel.
func TestUIServesTheBuild(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "assets"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "index.html"), []byte("<!doctype html>switchyard-ui"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "assets", "app-1234.js"), []byte("console.log(1)"), 0o644))
	t.Setenv("SWITCHYARD_WEB_DIR", dir)
	b := setup(t)

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(b.srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, string(raw)
	}
	resp, body := get("/ui/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "switchyard-ui")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	resp, body = get("/ui/assets/app-1234.js")
	require.Equal(t, "console.log(1)", body)
	require.Contains(t, resp.Header.Get("Cache-Control"), "immutable")
	_, body = get("/ui/runs/some-id") // an app route
	require.Contains(t, body, "switchyard-ui")
	_, body = get("/ui/..%2f..%2fgo.mod") // never leaves the directory
	require.Contains(t, body, "switchyard-ui")
	resp, _ = get("/")
	require.Equal(t, "/ui/", resp.Request.URL.Path, "/ redirects to the UI")
}

func TestUINotBuilt(t *testing.T) {
	t.Setenv("SWITCHYARD_WEB_DIR", filepath.Join(t.TempDir(), "missing"))
	b := setup(t)
	code, res := b.do("", http.MethodGet, "/ui/", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "UI_NOT_BUILT", res["code"])
}
