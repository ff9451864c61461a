package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// clock is a settable time source for the rate limits.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bundle is what most tests need: a Server behind a real HTTP listener, a go-openai
// client pointed at it, and the frozen limit clock.
type bundle struct {
	sim    *sim.Server
	url    string
	http   *http.Client
	client *openai.Client
	clock  *clock
}

func setup(t *testing.T, cfg sim.Config) *bundle {
	t.Helper()
	c := &clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	s, err := sim.New(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	oc := openai.DefaultConfig("any-key-is-accepted")
	oc.BaseURL = srv.URL + "/v1"
	oc.HTTPClient = srv.Client()
	return &bundle{sim: s, url: srv.URL, http: srv.Client(), client: openai.NewClientWithConfig(oc), clock: c}
}

// post sends a raw body and returns the status, headers and body.
func (b *bundle) post(t *testing.T, path string, body any) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	switch v := body.(type) {
	case string:
		r = bytes.NewBufferString(v)
	default:
		buf, err := json.Marshal(v)
		require.NoError(t, err)
		r = bytes.NewReader(buf)
	}
	resp, err := b.http.Post(b.url+path, "application/json", r)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

func (b *bundle) stats(t *testing.T) sim.Stats {
	t.Helper()
	resp, err := b.http.Get(b.url + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st sim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// eventually polls cond every few milliseconds until it holds or the deadline passes.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 10s: %s", msg)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func userRequest(model, text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

// errorBody is OpenAI's error format, decoded strictly enough to see every field present.
type errorBody struct {
	Error map[string]any `json:"error"`
}

func decodeError(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var e errorBody
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.NotNil(t, e.Error, string(body))
	for _, k := range []string{"message", "type", "param", "code"} {
		require.Contains(t, e.Error, k, "error body lacks %q: %s", k, body)
	}
	return e.Error
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
