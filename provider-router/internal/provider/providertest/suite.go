package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Driver is what an adapter package hands the suite.
type Driver struct {
	// New returns the adapter under test, pointed at baseURL and using apiKey.
	New func(t *testing.T, baseURL, apiKey string) provider.Adapter
	// Wire is the fake upstream speaking the provider's format.
	Wire Wire
	// ToolCallIDs is false for providers that carry no tool call ids (Gemini): the suite
	// then matches tool results by function name instead of by id.
	ToolCallIDs bool
	// RateLimitHeaders is true when the provider reports its limits in headers.
	RateLimitHeaders bool
}

// Key is the API key every case configures. Fakes echo it in error messages, as real
// providers do, so the suite can check that it never reaches an error string.
const Key = "sk-test-SECRET-0123456789"

// Fake is one running fake upstream with the requests it received.
type Fake struct {
	URL string

	t        *testing.T
	wire     Wire
	mu       sync.Mutex
	scenario Scenario
	requests []Request
	arrived  chan struct{}
}

// NewFake starts a fake upstream answering sc through wire; it stops at test cleanup.
// Adapter packages use it for their own provider-specific tests.
func NewFake(t *testing.T, wire Wire, sc Scenario) *Fake {
	t.Helper()
	f := &Fake{t: t, wire: wire, scenario: sc, arrived: make(chan struct{}, 16)}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(f.serve(done)))
	// Cleanups run last-in first-out: release hanging handlers before Close waits on them.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	f.URL = srv.URL
	return f
}

func (f *Fake) serve(done <-chan struct{}) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := f.wire.Decode(r, body)
		if err != nil {
			f.t.Errorf("fake upstream: decoding %s %s: %v\nbody: %s", r.Method, r.URL, err, body)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		sc := f.scenario
		f.mu.Unlock()
		f.arrived <- struct{}{}
		switch {
		case sc.Hang:
			select {
			case <-r.Context().Done():
			case <-done:
			}
		case sc.Status != 0:
			f.wire.Fail(w, req, sc)
		default:
			f.wire.Answer(w, req, sc)
		}
	}
}

// Requests returns what the fake received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Only returns the one request the fake received, failing the test otherwise.
func (f *Fake) Only(t *testing.T) Request {
	t.Helper()
	reqs := f.Requests()
	require.Len(t, reqs, 1, "the adapter must send exactly one request (the router retries, not the adapter)")
	return reqs[0]
}

// Arrived is signalled once per request received.
func (f *Fake) Arrived() <-chan struct{} { return f.arrived }

type bundle struct {
	fake    *Fake
	adapter provider.Adapter
}

func (d Driver) setup(t *testing.T, sc Scenario) bundle {
	t.Helper()
	f := NewFake(t, d.Wire, sc)
	return bundle{fake: f, adapter: d.New(t, f.URL, Key)}
}

// Weather is the tool the cases define.
var Weather = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name:        "get_weather",
	Description: "Current weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}}

// Run drives the adapter of d through every conformance case.
func Run(t *testing.T, d Driver) {
	t.Run("TextAnswer", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "Hello there.", Finish: openai.FinishReasonStop,
			Usage:     Usage{Prompt: 12, Completion: 5, Cached: 4},
			RateLimit: provider.RateLimit{Known: true, LimitRequests: 100, RemainingRequests: 99, LimitTokens: 5000, RemainingTokens: 4000}}
		b := d.setup(t, sc)
		resp, err := b.adapter.Chat(context.Background(), openai.ChatCompletionRequest{
			Model: "m-1",
			Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleSystem, Content: "Be brief."},
				{Role: openai.ChatMessageRoleUser, Content: "Hi"},
			},
			MaxTokens:   200,
			Temperature: 0.5,
			Stop:        []string{"END"},
		})
		require.NoError(t, err)
		requireAnswer(t, resp, sc)
		require.Equal(t, 12, resp.Usage.PromptTokens)
		require.Equal(t, 5, resp.Usage.CompletionTokens)
		require.Equal(t, 17, resp.Usage.TotalTokens)
		require.NotNil(t, resp.Usage.PromptTokensDetails)
		require.Equal(t, 4, resp.Usage.PromptTokensDetails.CachedTokens)
		if d.RateLimitHeaders {
			require.True(t, resp.RateLimit.Known)
			require.Equal(t, 100, resp.RateLimit.LimitRequests)
			require.Equal(t, 99, resp.RateLimit.RemainingRequests)
			require.Equal(t, 5000, resp.RateLimit.LimitTokens)
			require.Equal(t, 4000, resp.RateLimit.RemainingTokens)
		}

		got := b.fake.Only(t)
		require.Equal(t, Key, got.APIKey, "API key in the provider's auth header")
		require.Equal(t, "m-1", got.Model)
		require.False(t, got.Stream)
		require.Equal(t, "Be brief.", got.System)
		require.Equal(t, []Message{{Role: "user", Text: "Hi"}}, got.Messages)
		require.Equal(t, 200, got.MaxTokens)
		require.NotNil(t, got.Temperature)
		require.InDelta(t, 0.5, *got.Temperature, 1e-6)
		require.Equal(t, []string{"END"}, got.Stop)
	})

	t.Run("LengthFinish", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "Once upon a", Finish: openai.FinishReasonLength, Usage: Usage{Prompt: 3, Completion: 3}}
		b := d.setup(t, sc)
		resp, err := b.adapter.Chat(context.Background(), userRequest("Tell a story", 3))
		require.NoError(t, err)
		requireAnswer(t, resp, sc)
	})

	t.Run("ToolCallAnswer", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{ToolCalls: []ToolCall{{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			Finish: openai.FinishReasonToolCalls, Usage: Usage{Prompt: 20, Completion: 8}}
		b := d.setup(t, sc)
		req := userRequest("Weather in Paris?", 0)
		req.Tools = []openai.Tool{Weather}
		resp, err := b.adapter.Chat(context.Background(), req)
		require.NoError(t, err)
		requireAnswer(t, resp, sc)
		if d.ToolCallIDs {
			require.Equal(t, "call_abc", resp.Choices[0].Message.ToolCalls[0].ID)
		}
	})

	t.Run("ToolRoundTrip", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "Paris is sunny, Rome is rainy.", Finish: openai.FinishReasonStop, Usage: Usage{Prompt: 40, Completion: 9}}
		b := d.setup(t, sc)
		req := openai.ChatCompletionRequest{
			Model: "m-1",
			Messages: []openai.ChatCompletionMessage{
				{Role: openai.ChatMessageRoleSystem, Content: "Use tools."},
				{Role: openai.ChatMessageRoleUser, Content: "Weather in Paris and Rome?"},
				{Role: openai.ChatMessageRoleAssistant, Content: "Checking.", ToolCalls: []openai.ToolCall{
					{ID: "call_1", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
					{ID: "call_2", Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}},
				}},
				{Role: openai.ChatMessageRoleTool, ToolCallID: "call_1", Content: "sunny, 21C"},
				{Role: openai.ChatMessageRoleTool, ToolCallID: "call_2", Content: "rainy, 15C"},
			},
			Tools: []openai.Tool{Weather},
		}
		resp, err := b.adapter.Chat(context.Background(), req)
		require.NoError(t, err)
		requireAnswer(t, resp, sc)

		got := b.fake.Only(t)
		require.Equal(t, "Use tools.", got.System)
		want := []Message{
			{Role: "user", Text: "Weather in Paris and Rome?"},
			{Role: "assistant", Text: "Checking.", ToolCalls: []ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			{Role: "tool", ToolResults: []ToolResult{
				{CallID: "call_1", Name: "get_weather", Content: "sunny, 21C"},
				{CallID: "call_2", Name: "get_weather", Content: "rainy, 15C"},
			}},
		}
		requireMessages(t, d, want, got.Messages)
	})

	t.Run("ToolDefinitionsAndChoice", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			choice any
			want   string
		}{
			{"unset", nil, ""},
			{"auto", "auto", "auto"},
			{"required", "required", "required"},
			{"none", "none", "none"},
			{"function", openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "get_weather"}}, "function:get_weather"},
			{"decoded_json", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, "function:get_weather"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := d.setup(t, Scenario{Text: "ok", Finish: openai.FinishReasonStop, Usage: Usage{Prompt: 1, Completion: 1}})
				req := userRequest("Weather?", 0)
				req.Tools = []openai.Tool{Weather}
				req.ToolChoice = tc.choice
				_, err := b.adapter.Chat(context.Background(), req)
				require.NoError(t, err)
				got := b.fake.Only(t)
				require.Len(t, got.Tools, 1)
				require.Equal(t, "get_weather", got.Tools[0].Name)
				require.Equal(t, "Current weather for a city.", got.Tools[0].Description)
				require.JSONEq(t, string(Weather.Function.Parameters.(json.RawMessage)), string(got.Tools[0].Parameters))
				if tc.want == "" {
					// Unset means the provider's default, which is auto everywhere.
					require.Contains(t, []string{"", "auto"}, got.ToolChoice)
				} else {
					require.Equal(t, tc.want, got.ToolChoice)
				}
			})
		}
	})

	t.Run("JSONObject", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: `{"ok":true}`, Finish: openai.FinishReasonStop, Usage: Usage{Prompt: 5, Completion: 4}}
		b := d.setup(t, sc)
		req := userRequest("Answer in JSON", 0)
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		resp, err := b.adapter.Chat(context.Background(), req)
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, resp.Choices[0].Message.Content)
		require.Equal(t, "json_object", b.fake.Only(t).JSON)
	})

	t.Run("JSONSchema", func(t *testing.T) {
		t.Parallel()
		schema := `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
		sc := Scenario{Text: `{"city":"Paris"}`, Finish: openai.FinishReasonStop, Usage: Usage{Prompt: 5, Completion: 4}}
		b := d.setup(t, sc)
		req := userRequest("Which city?", 0)
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type:       openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "city", Schema: json.RawMessage(schema), Strict: true},
		}
		resp, err := b.adapter.Chat(context.Background(), req)
		require.NoError(t, err)
		require.JSONEq(t, `{"city":"Paris"}`, resp.Choices[0].Message.Content)
		got := b.fake.Only(t)
		require.Equal(t, "json_schema", got.JSON)
		require.JSONEq(t, schema, string(got.JSONSchema))
	})

	t.Run("StreamText", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "Hello, streaming world.", TextChunks: []string{"Hello", ", streaming", " world."},
			Finish: openai.FinishReasonStop, Usage: Usage{Prompt: 9, Completion: 6, Cached: 2}}
		b := d.setup(t, sc)
		var deltas []string
		var sawFinish, sawUsage bool
		resp, err := b.adapter.ChatStream(context.Background(), userRequest("Hi", 0), func(c openai.ChatCompletionStreamResponse) error {
			for _, ch := range c.Choices {
				if ch.Delta.Content != "" {
					deltas = append(deltas, ch.Delta.Content)
				}
				sawFinish = sawFinish || ch.FinishReason == openai.FinishReasonStop
			}
			sawUsage = sawUsage || c.Usage != nil
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, sc.TextChunks, deltas, "each upstream chunk is passed on as it arrives")
		require.True(t, sawFinish, "a chunk carries the finish reason")
		require.True(t, sawUsage, "a chunk carries the usage")
		requireAnswer(t, resp, sc)
		require.Equal(t, 2, resp.Usage.PromptTokensDetails.CachedTokens)
		require.True(t, b.fake.Only(t).Stream)
	})

	t.Run("StreamToolCall", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "Let me check.", ToolCalls: []ToolCall{
			{ID: "call_p", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{ID: "call_r", Name: "get_weather", Arguments: `{"city":"Rome"}`},
		}, Finish: openai.FinishReasonToolCalls, Usage: Usage{Prompt: 30, Completion: 20}}
		b := d.setup(t, sc)
		req := userRequest("Weather in Paris and Rome?", 0)
		req.Tools = []openai.Tool{Weather}
		var toolDeltas int
		resp, err := b.adapter.ChatStream(context.Background(), req, func(c openai.ChatCompletionStreamResponse) error {
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					require.NotNil(t, tc.Index, "streamed tool call deltas carry their index")
					toolDeltas++
				}
			}
			return nil
		})
		require.NoError(t, err)
		require.GreaterOrEqual(t, toolDeltas, 2)
		requireAnswer(t, resp, sc)
	})

	t.Run("StreamCallbackError", func(t *testing.T) {
		t.Parallel()
		sc := Scenario{Text: "abc", TextChunks: []string{"a", "b", "c"}, Finish: openai.FinishReasonStop}
		b := d.setup(t, sc)
		stop := errors.New("client went away")
		_, err := b.adapter.ChatStream(context.Background(), userRequest("Hi", 0), func(openai.ChatCompletionStreamResponse) error { return stop })
		require.ErrorIs(t, err, stop)
	})

	for _, tc := range []struct {
		name       string
		status     int
		retryAfter time.Duration
		retryable  bool
		stream     bool
	}{
		{"429", http.StatusTooManyRequests, 2 * time.Second, true, false},
		{"429Stream", http.StatusTooManyRequests, 2 * time.Second, true, true},
		{"500", http.StatusInternalServerError, 0, true, false},
		{"503", http.StatusServiceUnavailable, 0, true, false},
		{"400", http.StatusBadRequest, 0, false, false},
		{"401", http.StatusUnauthorized, 0, false, false},
		{"401Stream", http.StatusUnauthorized, 0, false, true},
		{"403", http.StatusForbidden, 0, false, false},
		{"404", http.StatusNotFound, 0, false, false},
	} {
		t.Run("Error"+tc.name, func(t *testing.T) {
			t.Parallel()
			b := d.setup(t, Scenario{Status: tc.status, RetryAfter: tc.retryAfter,
				ErrorMessage: "upstream says no (key " + Key + ")"})
			var err error
			if tc.stream {
				_, err = b.adapter.ChatStream(context.Background(), userRequest("Hi", 0), nil)
			} else {
				_, err = b.adapter.Chat(context.Background(), userRequest("Hi", 0))
			}
			var pe *provider.Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, b.adapter.Kind(), pe.Kind)
			require.Equal(t, tc.status, pe.Status)
			require.Equal(t, tc.retryable, pe.Retryable)
			require.Equal(t, tc.retryAfter, pe.RetryAfter)
			require.Contains(t, pe.Message, "upstream says no", "the provider's message is kept")
			require.NotContains(t, err.Error(), Key, "the API key never reaches an error")
			require.NotContains(t, pe.Code, Key)
		})
	}

	t.Run("NetworkError", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // nothing listens there any more: connection refused
		a := d.New(t, url, Key)
		_, err := a.Chat(context.Background(), userRequest("Hi", 0))
		var pe *provider.Error
		require.ErrorAs(t, err, &pe)
		require.True(t, pe.Retryable)
		require.Equal(t, 0, pe.Status)
		require.NotContains(t, err.Error(), Key)
	})

	for _, stream := range []bool{false, true} {
		name := "Cancel"
		if stream {
			name = "CancelStream"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := d.setup(t, Scenario{Hang: true})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-b.fake.Arrived()
				cancel()
			}()
			var err error
			if stream {
				_, err = b.adapter.ChatStream(ctx, userRequest("Hi", 0), nil)
			} else {
				_, err = b.adapter.Chat(ctx, userRequest("Hi", 0))
			}
			require.ErrorIs(t, err, context.Canceled)
			var pe *provider.Error
			require.False(t, errors.As(err, &pe) && pe.Retryable, "a cancelled call is not retried")
		})
	}
}

func userRequest(text string, maxTokens int) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:     "m-1",
		Messages:  []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
		MaxTokens: maxTokens,
	}
}

// requireAnswer checks resp against what sc stood for: text, tool calls, finish, usage.
func requireAnswer(t *testing.T, resp *provider.Response, sc Scenario) {
	t.Helper()
	require.NotNil(t, resp)
	require.Len(t, resp.Choices, 1)
	ch := resp.Choices[0]
	require.Equal(t, openai.ChatMessageRoleAssistant, ch.Message.Role)
	require.Equal(t, sc.Text, ch.Message.Content)
	require.Equal(t, sc.Finish, ch.FinishReason)
	require.Len(t, ch.Message.ToolCalls, len(sc.ToolCalls))
	for i, want := range sc.ToolCalls {
		got := ch.Message.ToolCalls[i]
		require.NotEmpty(t, got.ID, "every tool call has an id the tool result can name")
		require.Equal(t, openai.ToolTypeFunction, got.Type)
		require.Equal(t, want.Name, got.Function.Name)
		require.JSONEq(t, want.Arguments, got.Function.Arguments)
	}
	if sc.Usage != (Usage{}) {
		require.Equal(t, sc.Usage.Prompt, resp.Usage.PromptTokens)
		require.Equal(t, sc.Usage.Completion, resp.Usage.CompletionTokens)
		require.Equal(t, sc.Usage.Prompt+sc.Usage.Completion, resp.Usage.TotalTokens)
	}
}

// requireMessages compares neutral messages, by tool call id where the provider has ids
// and by function name where it has none.
func requireMessages(t *testing.T, d Driver, want, got []Message) {
	t.Helper()
	norm := func(ms []Message) []Message {
		out := make([]Message, len(ms))
		for i, m := range ms {
			m.Text = strings.TrimSpace(m.Text)
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				var v any
				if json.Unmarshal([]byte(c.Arguments), &v) == nil {
					b, _ := json.Marshal(v)
					c.Arguments = string(b)
				}
				if !d.ToolCallIDs {
					c.ID = ""
				}
				calls[j] = c
			}
			results := make([]ToolResult, len(m.ToolResults))
			for j, r := range m.ToolResults {
				if d.ToolCallIDs {
					r.Name = "" // providers with ids do not repeat the name
				} else {
					r.CallID = ""
				}
				results[j] = r
			}
			if len(calls) == 0 {
				calls = nil
			}
			if len(results) == 0 {
				results = nil
			}
			m.ToolCalls, m.ToolResults = calls, results
			out[i] = m
		}
		return out
	}
	require.Equal(t, norm(want), norm(got))
}
