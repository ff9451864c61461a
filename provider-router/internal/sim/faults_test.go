package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

func (b *bundle) repeats(t *testing.T) sim.Repeats {
	t.Helper()
	resp, err := b.http.Get(b.url + "/sim/repeats")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var r sim.Repeats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	return r
}

// TestRepeatsCountAnswersServedTwice: the same request answered twice is one repeat with
// the first user message to trace it; another request, a refused one and a streamed one
// count as what they are.
func TestRepeatsCountAnswersServedTwice(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{TrackRepeats: true, Models: []sim.ModelConfig{{Name: "m"}, {Name: "one", RPM: 1}}})
	ctx := ctxT(t)
	long := "job 17: " + strings.Repeat("x", 300)
	req := userRequest("m", long)
	req.Messages = append([]openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: "be brief"}}, req.Messages...)
	for range 3 {
		_, err := b.client.CreateChatCompletion(ctx, req)
		require.NoError(t, err)
	}
	_, err := b.client.CreateChatCompletion(ctx, userRequest("m", "another question"))
	require.NoError(t, err)
	// A streamed answer to the same question is the same answer paid again.
	stream := userRequest("m", "another question")
	stream.Stream = true
	s, err := b.client.CreateChatCompletionStream(ctx, stream)
	require.NoError(t, err)
	for {
		if _, err := s.Recv(); err != nil {
			break
		}
	}
	s.Close()
	// A refused request was not served: no repeat.
	_, err = b.client.CreateChatCompletion(ctx, userRequest("one", "limited"))
	require.NoError(t, err)
	_, err = b.client.CreateChatCompletion(ctx, userRequest("one", "limited"))
	require.Error(t, err)

	eventually(t, func() bool { return b.stats(t).Total.Served == 6 }, "six answers served")
	r := b.repeats(t)
	require.True(t, r.Tracking)
	require.EqualValues(t, 3, r.Distinct)
	require.EqualValues(t, 3, r.Extra, "two more answers to the first question, one more to the second")
	require.Len(t, r.Repeated, 2)
	require.Equal(t, "another question", r.Repeated[0].FirstUser)
	require.EqualValues(t, 2, r.Repeated[0].Served)
	require.Equal(t, long[:120], r.Repeated[1].FirstUser)
	require.EqualValues(t, 3, r.Repeated[1].Served)
	require.Len(t, r.Repeated[1].Digest, 64)
	st := b.stats(t)
	require.NotNil(t, st.Repeats)
	require.EqualValues(t, 3, st.Repeats.Extra)

	status, _, _ := b.post(t, "/sim/reset", "")
	require.Equal(t, http.StatusOK, status)
	r = b.repeats(t)
	require.Zero(t, r.Distinct)
	require.Empty(t, r.Repeated)
}

func TestRepeatsAreOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	_, err := b.client.CreateChatCompletion(ctxT(t), userRequest("sim-fast", "hi"))
	require.NoError(t, err)
	r := b.repeats(t)
	require.False(t, r.Tracking)
	require.Zero(t, r.Distinct)
	require.Nil(t, b.stats(t).Repeats)
}

func (b *bundle) burst(t *testing.T, method string, body any) (int, sim.BurstState) {
	t.Helper()
	var status int
	var raw []byte
	if method == http.MethodPost {
		status, _, raw = b.post(t, "/sim/faults", body)
	} else {
		req, err := http.NewRequest(method, b.url+"/sim/faults", nil)
		require.NoError(t, err)
		resp, err := b.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		status = resp.StatusCode
		raw, err = io.ReadAll(resp.Body)
		require.NoError(t, err)
	}
	var st sim.BurstState
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(raw, &st), string(raw))
	}
	return status, st
}

// TestBurstOfServerErrorsEndsAfterItsDuration: a 5xx burst answers every request at once
// without charging the limits, on the frozen clock, until its time has passed.
func TestBurstOfServerErrorsEndsAfterItsDuration(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{Models: []sim.ModelConfig{{Name: "m", RPM: 100}, {Name: "other"}}})
	status, st := b.burst(t, http.MethodPost, map[string]any{"status": 503, "duration": "5s", "model": "m"})
	require.Equal(t, http.StatusOK, status)
	require.True(t, st.Active)
	require.EqualValues(t, 5000, st.EndsInMS)

	for range 3 {
		status, h, body := b.post(t, "/v1/chat/completions", userRequest("m", "hi"))
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, "server_error", decodeError(t, body)["type"])
		require.Empty(t, h.Get("x-ratelimit-remaining-requests"), "a burst answers before the limits")
	}
	// Another model is not in the burst.
	status, _, _ = b.post(t, "/v1/chat/completions", userRequest("other", "hi"))
	require.Equal(t, http.StatusOK, status)

	b.clock.Advance(5 * time.Second)
	status, h, _ := b.post(t, "/v1/chat/completions", userRequest("m", "hi"))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "99", h.Get("x-ratelimit-remaining-requests"), "the burst charged nothing")
	_, st = b.burst(t, http.MethodGet, nil)
	require.False(t, st.Active)
	require.EqualValues(t, 3, st.Answered)
	c := b.stats(t).Models["m"]
	require.EqualValues(t, 3, c.Errors5xx)
	require.EqualValues(t, 4, c.Requests)
}

// TestBurstOf429sCountsRequestsAndSaysWhenToRetry: a 429 burst bounded by a number of
// requests sends OpenAI's rate-limit body with Retry-After, and DELETE ends a burst early.
func TestBurstOf429sCountsRequestsAndSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	status, _ := b.burst(t, http.MethodPost, map[string]any{"status": 429, "requests": 2, "duration": "3s"})
	require.Equal(t, http.StatusOK, status)
	for range 2 {
		status, h, body := b.post(t, "/v1/chat/completions", userRequest("sim-fast", "hi"))
		require.Equal(t, http.StatusTooManyRequests, status)
		e := decodeError(t, body)
		require.Equal(t, "rate_limit_exceeded", e["code"])
		require.Equal(t, "3", h.Get("Retry-After"))
		require.Equal(t, "3000", h.Get("retry-after-ms"))
	}
	status, _, _ = b.post(t, "/v1/chat/completions", userRequest("sim-fast", "hi"))
	require.Equal(t, http.StatusOK, status, "the burst's two requests are used up")
	require.EqualValues(t, 2, b.stats(t).Total.Refused429)

	status, _ = b.burst(t, http.MethodPost, map[string]any{"status": 500, "duration": "1h"})
	require.Equal(t, http.StatusOK, status)
	status, _, _ = b.post(t, "/v1/chat/completions", userRequest("sim-fast", "hi"))
	require.Equal(t, http.StatusInternalServerError, status)
	status, st := b.burst(t, http.MethodDelete, nil)
	require.Equal(t, http.StatusOK, status)
	require.False(t, st.Active)
	status, _, _ = b.post(t, "/v1/chat/completions", userRequest("sim-fast", "hi"))
	require.Equal(t, http.StatusOK, status)
}

func TestBurstRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	b := setup(t, sim.Config{})
	for _, body := range []map[string]any{
		{"status": 200, "duration": "1s"},
		{"status": 503},
		{"status": 503, "duration": "soon"},
		{"status": 503, "duration": "1s", "colour": "red"},
	} {
		status, _, raw := b.post(t, "/sim/faults", body)
		require.Equal(t, http.StatusBadRequest, status, "%v", body)
		require.NotEmpty(t, decodeError(t, raw)["message"])
	}
	status, _, raw := b.post(t, "/sim/faults", map[string]any{"status": 503, "duration": "1s", "model": "nope"})
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "model_not_found", decodeError(t, raw)["code"])
}
