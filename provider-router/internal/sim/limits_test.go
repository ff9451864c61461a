package sim_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

// fire sends n copies of req at once and returns the 200 and 429 responses' headers.
func fire(t *testing.T, b *bundle, n int, req openai.ChatCompletionRequest) (ok, limited []http.Header, limitedBodies [][]byte) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, h, body := b.post(t, "/v1/chat/completions", req)
			mu.Lock()
			defer mu.Unlock()
			switch status {
			case http.StatusOK:
				ok = append(ok, h)
			case http.StatusTooManyRequests:
				limited = append(limited, h)
				limitedBodies = append(limitedBodies, body)
			default:
				t.Errorf("unexpected status %d: %s", status, body)
			}
		})
	}
	wg.Wait()
	return ok, limited, limitedBodies
}

func TestRPMLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", RPM: 10}}})
	ok, limited, bodies := fire(t, b, 60, userRequest("m", "hi"))
	require.Len(t, ok, 10, "the clock is frozen, so exactly the bucket's capacity is admitted")
	require.Len(t, limited, 50)

	for _, h := range ok {
		require.Equal(t, "10", h.Get("x-ratelimit-limit-requests"))
		rem, err := strconv.Atoi(h.Get("x-ratelimit-remaining-requests"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, rem, 0)
		require.Less(t, rem, 10)
		require.NotEmpty(t, h.Get("x-ratelimit-reset-requests"))
		require.Empty(t, h.Get("x-ratelimit-limit-tokens"), "no TPM limit, no token headers")
		require.Empty(t, h.Get("Retry-After"))
	}
	for i, h := range limited {
		require.Equal(t, "10", h.Get("x-ratelimit-limit-requests"))
		require.Equal(t, "0", h.Get("x-ratelimit-remaining-requests"))
		require.Equal(t, "1m0s", h.Get("x-ratelimit-reset-requests"), "an empty bucket refills in a minute")
		require.Equal(t, "6", h.Get("Retry-After"), "one request refills in 60s/10")
		require.Equal(t, "6000", h.Get("retry-after-ms"))
		e := decodeError(t, bodies[i])
		require.Equal(t, "requests", e["type"])
		require.Equal(t, "rate_limit_exceeded", e["code"])
	}

	st := b.stats(t).Models["m"]
	require.EqualValues(t, 60, st.Requests)
	require.EqualValues(t, 10, st.Served)
	require.EqualValues(t, 50, st.Refused429)
	require.Equal(t, st.Requests, st.Served+st.Refused429)

	// The bucket refills continuously: 6 s later there is room for exactly one more.
	b.clock.Advance(6 * time.Second)
	ok, limited, _ = fire(t, b, 5, userRequest("m", "hi"))
	require.Len(t, ok, 1)
	require.Len(t, limited, 4)
}

func TestTPMLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", TPM: 1000, Output: "constant:10"}}})
	req := userRequest("m", "0123456789abcdef0123456789abcdef0123456789abcdef") // 48 chars: 12 tokens
	req.MaxTokens = 88                                                          // charged 12+88 = 100 per request
	ok, limited, bodies := fire(t, b, 25, req)
	require.Len(t, ok, 10)
	require.Len(t, limited, 15)
	for i, h := range limited {
		require.Equal(t, "1000", h.Get("x-ratelimit-limit-tokens"))
		rem, err := strconv.Atoi(h.Get("x-ratelimit-remaining-tokens"))
		require.NoError(t, err)
		require.Less(t, rem, 100)
		require.Equal(t, "6", h.Get("Retry-After"), "100 tokens refill in 6s at 1000/min")
		e := decodeError(t, bodies[i])
		require.Equal(t, "tokens", e["type"])
		require.Equal(t, "rate_limit_exceeded", e["code"])
	}
	st := b.stats(t).Models["m"]
	require.EqualValues(t, 25, st.Requests)
	require.Equal(t, st.Requests, st.Served+st.Refused429)
	require.EqualValues(t, 10*12, st.PromptTokens, "usage reports the actual prompt")
	require.EqualValues(t, 10*10, st.CompletionTokens, "and the actual output, not max_tokens")

	// A request larger than the whole minute's budget is refused outright.
	b.clock.Advance(time.Hour)
	req.MaxTokens = 5000
	status, h, body := b.post(t, "/v1/chat/completions", req)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "tokens", decodeError(t, body)["type"])
	require.Equal(t, "60", h.Get("Retry-After"))
}

func TestLimitsWindowFollowsTimeScale(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", RPM: 10}}, TimeScale: 0.001})
	ok, limited, _ := fire(t, b, 11, userRequest("m", "hi"))
	require.Len(t, ok, 10)
	require.Len(t, limited, 1)
	h := limited[0]
	require.Equal(t, "6", h.Get("retry-after-ms"), "60s/10 scaled by 0.001")
	require.Equal(t, "1", h.Get("Retry-After"), "whole seconds, rounded up")
	require.Equal(t, "60ms", h.Get("x-ratelimit-reset-requests"))
}

func TestResetRefillsLimitsAndZeroesCounters(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", RPM: 1}}})
	ctx := ctxT(t)
	_, err := b.client.CreateChatCompletion(ctx, userRequest("m", "hi"))
	require.NoError(t, err)
	_, err = b.client.CreateChatCompletion(ctx, userRequest("m", "hi"))
	var apiErr *openai.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusTooManyRequests, apiErr.HTTPStatusCode)
	require.Equal(t, int64(2), b.stats(t).Total.Requests)

	status, _, _ := b.post(t, "/sim/reset", "")
	require.Equal(t, http.StatusOK, status)
	st := b.stats(t)
	require.Zero(t, st.Total.Requests)
	require.Zero(t, st.Models["m"].Served)
	require.Zero(t, st.Models["m"].Refused429)
	_, err = b.client.CreateChatCompletion(ctx, userRequest("m", "hi"))
	require.NoError(t, err, "reset refilled the bucket")
}

func TestErrorRate(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{
		{Name: "broken", ErrorRate: 1},
		{Name: "flaky", ErrorRate: 0.5},
	}})
	_, err := b.client.CreateChatCompletion(ctxT(t), userRequest("broken", "hi"))
	var apiErr *openai.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Contains(t, []int{500, 503}, apiErr.HTTPStatusCode)
	require.Equal(t, "server_error", apiErr.Type)

	const n = 400
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			status, _, body := b.post(t, "/v1/chat/completions", userRequest("flaky", "hi"))
			if status >= 500 {
				decodeError(t, body)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	// Binomial(400, 0.5): sd 10, so ±70 is seven standard deviations.
	require.InDelta(t, n/2, failed.Load(), 70)
	st := b.stats(t).Models["flaky"]
	require.EqualValues(t, n, st.Requests)
	require.Equal(t, failed.Load(), st.Errors5xx)
	require.Equal(t, st.Requests, st.Served+st.Errors5xx)
}

// TestManySlowRequests holds hundreds of requests in their latency at once, checks the
// in-flight counters, then cancels them all and sees every goroutine released.
func TestManySlowRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "slow", Latency: "constant:1h"}}})
	const n = 300
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req := userRequest("slow", "hi")
			req.Stream = i%2 == 0
			if req.Stream {
				s, err := b.client.CreateChatCompletionStream(ctx, req)
				if err == nil {
					_, err = s.Recv()
					s.Close()
				}
				assert.Error(t, err) // not require: this is not the test's goroutine
				return
			}
			_, err := b.client.CreateChatCompletion(ctx, req)
			assert.ErrorIs(t, err, context.Canceled)
		})
	}
	eventually(t, func() bool { return b.stats(t).Models["slow"].InFlight == n }, "all requests in flight")
	cancel()
	wg.Wait()
	eventually(t, func() bool { return b.stats(t).Models["slow"].InFlight == 0 }, "all requests released")
	st := b.stats(t).Models["slow"]
	require.EqualValues(t, n, st.MaxInFlight)
	require.EqualValues(t, n, st.Cancelled)
	require.Zero(t, st.Served)
	require.Equal(t, st.Requests, st.Served+st.Cancelled)
}
