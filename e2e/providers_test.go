package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/harness"
)

// openAIServer is a provider that speaks OpenAI's Chat Completions wire format and accepts
// exactly one API key at a time (a provider whose old key was rotated away or revoked
// refuses it with 401, as OpenAI does). It records the Authorization header of every call.
type openAIServer struct {
	*httptest.Server
	mu    sync.Mutex
	valid string
	seen  []string
}

func newOpenAIServer(t *testing.T) *openAIServer {
	o := &openAIServer{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		auth := r.Header.Get("Authorization")
		o.mu.Lock()
		o.seen = append(o.seen, auth)
		ok := auth == "Bearer "+o.valid
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}`))
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
			"model": body.Model, "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": "OK from fake"}}},
			"usage": map[string]any{"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *openAIServer) accept(key string) {
	o.mu.Lock()
	o.valid = key
	o.mu.Unlock()
}

func (o *openAIServer) calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// TestAdminConnectsAProviderWithAKey: an organisation's admin adds an OpenAI-compatible
// provider and its key through the API, tests the connection, routes a hint to it; a job
// routed there succeeds and the provider saw the key entered. A rotated key is used by the
// next call without a restart; a revoked key makes calls fail CREDENTIAL_REVOKED; a wrong
// key makes "Test connection" show the provider's 401. No key reaches a log.
func TestAdminConnectsAProviderWithAKey(t *testing.T) {
	s := startStack(t, StackOptions{})
	fake := newOpenAIServer(t)
	const key1, key2, wrong = "sk-e2e-first-key-0001", "sk-e2e-second-key-0002", "sk-e2e-wrong-key-9999"
	fake.accept(key1)

	code, p := s.Do(http.MethodPut, "/api/v1/admin/providers/fake", map[string]any{"kind": "openai_compatible",
		"baseUrl": fake.URL + "/v1", "jurisdiction": "eu", "models": map[string]string{"default": "fake-model"}})
	require.Equal(t, http.StatusCreated, code, "%v", p)
	code, c := s.Do(http.MethodPut, "/api/v1/admin/providers/fake/credential", map[string]any{"apiKey": key1})
	require.Equal(t, http.StatusOK, code, "%v", c)
	require.Equal(t, "0001", c["last4"])
	require.Equal(t, "age", c["scheme"])
	code, p = s.Do(http.MethodGet, "/api/v1/admin/providers/fake", nil)
	require.Equal(t, http.StatusOK, code)
	raw, _ := json.Marshal(p)
	require.NotContains(t, string(raw), key1, "the key is never shown again")
	require.Equal(t, "0001", p["credential"].(map[string]any)["last4"])

	// Test connection goes dispatcher → queue → executor → router → provider.
	code, tr := s.Do(http.MethodPost, "/api/v1/admin/providers/fake/test", nil)
	require.Equal(t, http.StatusOK, code, "%v", tr)
	require.Equal(t, true, tr["ok"], "%v", tr)
	require.Equal(t, "OK from fake", tr["answer"])
	require.Equal(t, []string{"Bearer " + key1}, fake.calls())

	// Route the code hint to it; a job of a skill with that hint is served there.
	code, pol := s.Do(http.MethodGet, "/api/v1/admin/routing", nil)
	require.Equal(t, http.StatusOK, code)
	rules := pol["rules"].([]any)
	for i, r := range rules {
		if r.(map[string]any)["hint"] == "code" {
			rules[i] = map[string]any{"hint": "code", "provider": "fake"}
		}
	}
	code, pol = s.Do(http.MethodPut, "/api/v1/admin/routing", map[string]any{"rules": rules})
	require.Equal(t, http.StatusOK, code, "%v", pol)
	code, sk := s.Do(http.MethodPut, "/api/v1/skills/e2e.fake", map[string]any{"job_type": "e2e.fake",
		"execution_type": "llm_only", "routing_hint": "code", "enabled": true, "max_retries": 0})
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, code, "%v", sk)
	run := func() map[string]any {
		t.Helper()
		code, r := s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{"job_type": "e2e.fake",
			"payload": map[string]any{"prompt": "hello"}})
		require.Equal(t, http.StatusAccepted, code, "%v", r)
		return s.WaitStatus(r["jobId"].(string), 30*time.Second, "completed", "failed")
	}
	r := run()
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, "fake", r["output"].(map[string]any)["provider"])
	require.Equal(t, "Bearer "+key1, fake.calls()[len(fake.calls())-1])

	// Rotation: the provider accepts only the new key from now on; within a second, with no
	// restart, jobs are served with it (a job that raced the change may still carry the old
	// key and fail: the routers follow the change's notification, not the PUT's answer).
	fake.accept(key2)
	rotated := time.Now()
	code, c = s.Do(http.MethodPut, "/api/v1/admin/providers/fake/credential", map[string]any{"apiKey": key2})
	require.Equal(t, http.StatusOK, code, "%v", c)
	for {
		r = run()
		if r["status"] == "completed" {
			require.Equal(t, "Bearer "+key2, fake.calls()[len(fake.calls())-1])
			break
		}
		require.Less(t, time.Since(rotated), time.Second, "the rotated key is not used within a second: %v", r)
	}
	t.Logf("rotation to the first call served with the new key: %s", time.Since(rotated))

	// Revocation: within a second calls fail with a clear error naming the provider, and the
	// provider is not called.
	code, _ = s.Do(http.MethodDelete, "/api/v1/admin/providers/fake/credential", nil)
	require.Equal(t, http.StatusNoContent, code)
	revoked := time.Now()
	for {
		before := len(fake.calls())
		r = run()
		if r["status"] == "failed" {
			e := r["error"].(map[string]any)
			require.Equal(t, "CREDENTIAL_REVOKED", e["code"], "%v", e)
			require.Contains(t, e["message"], "fake")
			require.Len(t, fake.calls(), before, "a revoked credential is never sent")
			break
		}
		require.Less(t, time.Since(revoked), time.Second, "the revocation does not apply within a second: %v", r)
	}
	code, p = s.Do(http.MethodGet, "/api/v1/admin/providers/fake", nil)
	require.Equal(t, http.StatusOK, code)
	require.NotNil(t, p["credential"].(map[string]any)["revokedAt"])

	// A wrong key: Test connection shows the provider's 401, naming the provider.
	code, _ = s.Do(http.MethodPut, "/api/v1/admin/providers/fake/credential", map[string]any{"apiKey": wrong})
	require.Equal(t, http.StatusOK, code)
	set := time.Now()
	var te map[string]any
	for {
		code, tr = s.Do(http.MethodPost, "/api/v1/admin/providers/fake/test", nil)
		require.Equal(t, http.StatusOK, code, "%v", tr)
		require.Equal(t, false, tr["ok"], "%v", tr)
		te = tr["error"].(map[string]any)
		if te["code"] == "PROVIDER_REJECTED" {
			break
		}
		require.Equal(t, "CREDENTIAL_REVOKED", te["code"], "only the revocation may still show: %v", te)
		require.Less(t, time.Since(set), time.Second, "the new key is not used within a second")
	}
	require.Contains(t, te["message"], "Provider fake refused the API key (HTTP 401)")
	raw, _ = json.Marshal(tr)
	require.NotContains(t, string(raw), wrong)

	// Test connection against sim-llm (no key).
	code, tr = s.Do(http.MethodPost, "/api/v1/admin/providers/sim-llm/test", nil)
	require.Equal(t, http.StatusOK, code, "%v", tr)
	require.Equal(t, true, tr["ok"], "%v", tr)

	// No key in any log.
	for _, svc := range []string{harness.Dispatcher, harness.Router, harness.Executor} {
		b, err := os.ReadFile(s.H.LogPath(svc))
		require.NoError(t, err)
		for _, k := range []string{key1, key2, wrong} {
			require.False(t, strings.Contains(string(b), k), "%s's log holds a key", svc)
		}
	}
}
