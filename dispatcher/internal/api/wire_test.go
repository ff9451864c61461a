package api_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
)

// rawDo sends a request and returns the status and the body as the dispatcher wrote it.
func (b *bundle) rawDo(key, method, path, body string) (int, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp.StatusCode, string(raw)
}

// What varies from run to run; masked so that what is left — member names, their order,
// nulls, omitted members, value types — can be compared byte for byte.
var (
	wireUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	wireTime = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"`)
	wireKey  = regexp.MustCompile(`"sy_[A-Za-z0-9_-]+"`)
	wirePfx  = regexp.MustCompile(`"prefix":"[^"]*"`)
	wireCur  = regexp.MustCompile(`"nextCursor":"[^"]*"`)
	wireMon  = regexp.MustCompile(`"month":"\d{4}-\d\d"`)
	wireMS   = regexp.MustCompile(`"(queueWaitMs|durationMs)":[0-9.]+`)
)

func maskWire(s string) string {
	s = wireUUID.ReplaceAllString(s, "<uuid>")
	s = wireTime.ReplaceAllString(s, `"<time>"`)
	s = wireKey.ReplaceAllString(s, `"<key>"`)
	s = wirePfx.ReplaceAllString(s, `"prefix":"<prefix>"`)
	s = wireCur.ReplaceAllString(s, `"nextCursor":"<cursor>"`)
	s = wireMon.ReplaceAllString(s, `"month":"<month>"`)
	return wireMS.ReplaceAllString(s, `"$1":<ms>`)
}

// TestWireBodiesUnchanged pins the bytes of the public API's answers (ids and times
// masked) in testdata/wire.golden, so that a change of the types behind them — the shared
// apitypes — cannot change what clients receive unnoticed. SWITCHYARD_UPDATE_GOLDEN=1
// rewrites the file after an intended change.
func TestWireBodiesUnchanged(t *testing.T) {
	b := setup(t)
	admin := b.newKey(auth.RoleAdmin, auth.RoleApprove, auth.RoleViewer)
	var out strings.Builder
	record := func(name, key, method, path, body string) string {
		status, raw := b.rawDo(key, method, path, body)
		out.WriteString("== " + name + " " + http.StatusText(status) + "\n" + maskWire(strings.TrimSpace(raw)) + "\n")
		return raw
	}

	held := record("dispatch held", b.key, http.MethodPost, "/api/v1/dispatch",
		`{"job_type":"demo_high_risk","payload":{"prompt":"write to ann@example.com"},"metadata":{"source_service":"s"}}`)
	id := wireUUID.FindString(held)
	require.NotEmpty(t, id, held)
	record("dispatch queued", b.key, http.MethodPost, "/api/v1/dispatch",
		`{"job_type":"demo_llm","payload":{"prompt":"hi"},"user_id":"u1","priority":"high","idempotency_key":"k1"}`)
	record("dispatch duplicate", b.key, http.MethodPost, "/api/v1/dispatch",
		`{"job_type":"demo_llm","payload":{"prompt":"hi"},"user_id":"u1","priority":"high","idempotency_key":"k1"}`)
	record("batch", b.key, http.MethodPost, "/api/v1/dispatch/batch",
		`{"items":[{"job_type":"demo_llm","payload":{"prompt":"a"}},{"job_type":"nope","payload":{}}]}`)
	record("get run", b.key, http.MethodGet, "/api/v1/dispatch/"+id, "")
	record("list runs", b.key, http.MethodGet, "/api/v1/dispatch?limit=1", "")
	record("reviews", admin, http.MethodGet, "/api/v1/reviews", "")
	record("events", b.key, http.MethodGet, "/api/v1/dispatch/"+id+"/events", "")
	record("spans", b.key, http.MethodGet, "/api/v1/dispatch/"+id+"/spans", "")
	record("reject", admin, http.MethodPost, "/api/v1/dispatch/"+id+"/reject", `{"reason":"no"}`)
	record("cancel finished", admin, http.MethodPost, "/api/v1/dispatch/"+id+"/cancel", "")
	record("not found", b.key, http.MethodGet, "/api/v1/dispatch/00000000-0000-4000-8000-000000000000", "")
	record("invalid", b.key, http.MethodPost, "/api/v1/dispatch", `{"job_type":"X","payload":{},"extra":1}`)
	record("org", admin, http.MethodGet, "/api/v1/admin/org", "")
	record("org patch", admin, http.MethodPatch, "/api/v1/admin/org", `{"userRpm":7,"monthlyTokenQuota":1000}`)
	record("key create", admin, http.MethodPost, "/api/v1/admin/keys", `{"name":"ci","roles":["viewer"]}`)
	record("keys", admin, http.MethodGet, "/api/v1/admin/keys", "")
	record("queue put", admin, http.MethodPut, "/api/v1/admin/queues/wire-q", `{"class":"cpu","concurrency":2,"timeoutSeconds":30}`)
	record("queues", admin, http.MethodGet, "/api/v1/admin/queues", "")
	record("usage", admin, http.MethodGet, "/api/v1/admin/usage", "")
	record("skill", admin, http.MethodGet, "/api/v1/skills/demo_llm", "")

	golden := filepath.Join("testdata", "wire.golden")
	if os.Getenv("SWITCHYARD_UPDATE_GOLDEN") == "1" {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}
