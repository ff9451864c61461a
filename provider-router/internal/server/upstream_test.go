package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/credential"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/provider-router/internal/registry"
	"github.com/switchyard-ai/switchyard/provider-router/internal/server"
	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

const okAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"sim-fast",
"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`

// fake is an OpenAI-wire upstream answering from a script of (status, headers, body).
type fake struct {
	mu     sync.Mutex
	script func(n int, r *http.Request) (int, map[string]string, string)
	times  []time.Time
	auth   []string
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.times = append(f.times, time.Now())
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	n := len(f.times)
	f.mu.Unlock()
	status, hdr, body := f.script(n, r)
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (f *fake) calls() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.times...)
}

// Two router replicas on one Redis share the provider's RPM: traffic far above it is
// served at the limit with zero upstream 429s (sim-llm enforces the same RPM and counts
// what it refused) — through the shared queue alone, and with the replicas admitting from
// their shares while the bucket has headroom (the router's default).
func TestTwoReplicasShareLimits(t *testing.T) {
	t.Parallel()
	for _, shares := range []int{0, 64} {
		t.Run(fmt.Sprintf("shares=%d", shares), func(t *testing.T) {
			t.Parallel()
			opts := options{models: []sim.ModelConfig{{Name: "sim-fast", Output: "constant:5", RPM: 1200}}, shares: shares}
			b := setup(t, opts)
			// The router's limit sits just under the provider's: they count on different clocks.
			_, err := b.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm) VALUES ($1, 'sim-fast', 1180)`, b.providerID)
			require.NoError(t, err)
			second := b.serve(b.newServer(opts))
			urls := []string{b.url, second}

			const calls = 1260 // the burst of 1180, then 80 more at 1180/min: ~4 s of waiting
			var next atomic.Int64
			codes := make([]atomic.Int64, 600)
			var wg sync.WaitGroup
			for w := range 24 {
				wg.Go(func() {
					for next.Add(1) <= calls {
						code, out, _ := chatVia(t, b.client, urls[w%2], b.headers(), simpleBody)
						if code != http.StatusOK {
							t.Errorf("call failed: %d %v", code, out)
						}
						codes[code].Add(1)
					}
				})
			}
			wg.Wait()
			st := b.sim.Stats().Total
			require.Zero(t, st.Refused429, "the provider refused nothing")
			require.EqualValues(t, calls, st.Served)
			require.EqualValues(t, calls, codes[http.StatusOK].Load())
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	f := &fake{script: func(n int, _ *http.Request) (int, map[string]string, string) {
		if n == 1 {
			return http.StatusTooManyRequests, map[string]string{"retry-after-ms": "400", "Retry-After": "1"},
				`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
		}
		return http.StatusOK, nil, okAnswer
	}}
	b := setup(t, options{upstream: f})
	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	calls := f.calls()
	require.Len(t, calls, 2)
	require.GreaterOrEqual(t, calls[1].Sub(calls[0]), 400*time.Millisecond, "the retry waited out Retry-After")
}

func TestRetryGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := &fake{script: func(int, *http.Request) (int, map[string]string, string) {
		return http.StatusTooManyRequests, map[string]string{"Retry-After": "30"},
			`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	}}
	b := setup(t, options{upstream: f})
	h := b.headers()
	h["X-Deadline"] = time.Now().Add(5 * time.Second).UTC().Format(time.RFC3339Nano)
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusTooManyRequests, code, "%v", out)
	require.Equal(t, "PROVIDER_RATE_LIMITED", errCode(out))
	require.Len(t, f.calls(), 1, "a 30 s Retry-After does not fit a 5 s deadline: no second attempt")
}

func TestBreakerOpensAfterServerErrors(t *testing.T) {
	t.Parallel()
	f := &fake{script: func(int, *http.Request) (int, map[string]string, string) {
		return http.StatusInternalServerError, nil, `{"error":{"message":"boom","type":"server_error"}}`
	}}
	b := setup(t, options{upstream: f, retry: server.Retry{Attempts: 1},
		breaker: breaker.Options{Failures: 2, OpenFor: time.Hour}})
	for range 2 {
		code, out := b.chat(b.headers(), simpleBody)
		require.Equal(t, http.StatusBadGateway, code, "%v", out)
		require.Equal(t, "PROVIDER_UNAVAILABLE", errCode(out))
	}
	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, "PROVIDER_CIRCUIT_OPEN", errCode(out))
	require.Len(t, f.calls(), 2, "the open breaker kept the third call from the provider")
}

func TestRetriesServerErrorsThenSucceeds(t *testing.T) {
	t.Parallel()
	f := &fake{script: func(n int, _ *http.Request) (int, map[string]string, string) {
		if n < 3 {
			return http.StatusServiceUnavailable, nil, `{"error":{"message":"busy","type":"server_error"}}`
		}
		return http.StatusOK, nil, okAnswer
	}}
	b := setup(t, options{upstream: f})
	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Len(t, f.calls(), 3)
}

func newRing(t *testing.T, current string, ids ...string) (*credential.KeyRing, map[string]string) {
	keys := map[string]string{}
	var parts []string
	for _, id := range ids {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		keys[id] = base64.StdEncoding.EncodeToString(k)
		parts = append(parts, fmt.Sprintf("%q:%q", id, keys[id]))
	}
	r, err := credential.ParseKeyRing([]byte(fmt.Sprintf(`{"current":%q,"keys":{%s}}`, current, strings.Join(parts, ","))))
	require.NoError(t, err)
	return r, keys
}

// The provider key reaches the provider and nothing else: not the logs (captured at debug
// level, across a rejected call whose provider error echoes the key), not the answers.
func TestCredentialUsedAndNeverLogged(t *testing.T) {
	t.Parallel()
	secret := "sk-test-" + rand.Text()
	f := &fake{script: func(n int, r *http.Request) (int, map[string]string, string) {
		if n == 1 {
			return http.StatusUnauthorized, nil,
				`{"error":{"message":"Incorrect API key provided: ` + secret + `","type":"invalid_request_error","code":"invalid_api_key"}}`
		}
		return http.StatusOK, nil, okAnswer
	}}
	ring, _ := newRing(t, "k1", "k1")
	b := setup(t, options{upstream: f, ring: ring})
	require.NoError(t, b.srv.Credentials.Set(context.Background(), b.orgSlug, "upstream", credential.Secret(secret)))

	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusBadGateway, code, "%v", out)
	require.Equal(t, "PROVIDER_REJECTED", errCode(out))
	require.NotContains(t, fmt.Sprint(out), secret)
	code, out = b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	b.srv.Wait()

	f.mu.Lock()
	require.Equal(t, []string{"Bearer " + secret, "Bearer " + secret}, f.auth)
	f.mu.Unlock()
	logs := b.logs.String()
	require.Contains(t, logs, "PROVIDER_REJECTED", "the rejected call was logged")
	require.NotContains(t, logs, secret)
	var row []byte
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT ciphertext FROM provider_credentials`).Scan(&row))
	require.NotContains(t, string(row), secret, "encrypted at rest")
}

// provider_limits edited in Postgres reach every replica's limiter within a second.
func TestLimitsFollowTheRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	w := &registry.Watcher{DB: b.pool, Log: b.srv.Log, OnChange: b.srv.OnRegistryChange, OnReset: b.srv.OnRegistryReset}
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Stop)
	key := limiter.BucketKey{Credential: b.providerID, Model: "sim-fast"}
	wait := func(want limiter.Limits) {
		t.Helper()
		require.Eventually(t, func() bool {
			st, err := b.srv.Limiter.State(context.Background(), key)
			return err == nil && st.Limits == want
		}, time.Second, 10*time.Millisecond)
	}
	_, err := b.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm) VALUES ($1, 'sim-fast', 100, 5000)`, b.providerID)
	require.NoError(t, err)
	wait(limiter.Limits{RPM: 100, TPM: 5000})
	_, err = b.pool.Exec(context.Background(), `UPDATE provider_limits SET rpm = 7 WHERE provider_config_id = $1`, b.providerID)
	require.NoError(t, err)
	wait(limiter.Limits{RPM: 7, TPM: 5000})
	_, err = b.pool.Exec(context.Background(), `DELETE FROM provider_limits WHERE provider_config_id = $1`, b.providerID)
	require.NoError(t, err)
	wait(limiter.Limits{})

	// Routing too: a policy change applies to the next call.
	h := b.headers()
	h["X-Routing-Hint"] = "fast"
	code, _ := b.chat(h, simpleBody)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	_, err = b.pool.Exec(context.Background(), `INSERT INTO routing_policies (org_id, hint, provider_config_id) VALUES ($1, 'fast', $2)`, b.orgID, b.providerID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { code, _ := b.chat(h, simpleBody); return code == http.StatusOK }, time.Second, 20*time.Millisecond)
}
