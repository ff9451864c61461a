package provider_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
	} {
		require.Equal(t, tc.want, provider.RetryAfter(tc.h), tc.h)
	}
}

func TestOpenAIRateLimit(t *testing.T) {
	t.Parallel()
	rl := provider.OpenAIRateLimit(http.Header{
		"X-Ratelimit-Limit-Requests": {"60"}, "X-Ratelimit-Remaining-Requests": {"59"},
		"X-Ratelimit-Reset-Requests": {"1s"}, "X-Ratelimit-Reset-Tokens": {"6m0s"},
	})
	require.True(t, rl.Known)
	require.Equal(t, 60, rl.LimitRequests)
	require.Equal(t, 59, rl.RemainingRequests)
	require.Equal(t, time.Second, rl.ResetRequests)
	require.Equal(t, 6*time.Minute, rl.ResetTokens)
	require.False(t, provider.OpenAIRateLimit(http.Header{}).Known)
}

func TestParseToolChoice(t *testing.T) {
	t.Parallel()
	var decoded any
	require.NoError(t, json.Unmarshal([]byte(`{"type":"function","function":{"name":"f"}}`), &decoded))
	for _, tc := range []struct {
		in   any
		mode provider.ToolChoiceMode
		name string
	}{
		{nil, provider.ToolChoiceUnset, ""},
		{"auto", provider.ToolChoiceAuto, ""},
		{"required", provider.ToolChoiceRequired, ""},
		{"none", provider.ToolChoiceNone, ""},
		{openai.ToolChoice{Type: "function", Function: openai.ToolFunction{Name: "f"}}, provider.ToolChoiceFunction, "f"},
		{&openai.ToolChoice{Type: "function", Function: openai.ToolFunction{Name: "f"}}, provider.ToolChoiceFunction, "f"},
		{decoded, provider.ToolChoiceFunction, "f"},
	} {
		mode, name, err := provider.ParseToolChoice(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.mode, mode)
		require.Equal(t, tc.name, name)
	}
	_, _, err := provider.ParseToolChoice("sometimes")
	require.Error(t, err)
}

func TestAccumulatorMergesToolCallsByIndex(t *testing.T) {
	t.Parallel()
	i0, i1 := 0, 1
	var acc provider.Accumulator
	for _, d := range []openai.ChatCompletionStreamChoiceDelta{
		{Role: "assistant", Content: "a"},
		{ToolCalls: []openai.ToolCall{{Index: &i1, ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "g"}}}},
		{ToolCalls: []openai.ToolCall{{Index: &i0, ID: "c0", Type: "function", Function: openai.FunctionCall{Name: "f"}}}},
		{ToolCalls: []openai.ToolCall{{Index: &i0, Function: openai.FunctionCall{Arguments: `{"x":`}}}},
		{ToolCalls: []openai.ToolCall{{Index: &i1, Function: openai.FunctionCall{Arguments: `{}`}}}},
		{ToolCalls: []openai.ToolCall{{Index: &i0, Function: openai.FunctionCall{Arguments: `1}`}}}},
		{Content: "b"},
	} {
		acc.Add(openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{{Delta: d}}})
	}
	acc.Add(openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{{FinishReason: "tool_calls"}}})
	acc.Add(openai.ChatCompletionStreamResponse{Usage: &openai.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}})
	resp := acc.Response()
	msg := resp.Choices[0].Message
	require.Equal(t, "ab", msg.Content)
	require.Equal(t, []openai.ToolCall{
		{ID: "c0", Type: "function", Function: openai.FunctionCall{Name: "f", Arguments: `{"x":1}`}},
		{ID: "c1", Type: "function", Function: openai.FunctionCall{Name: "g", Arguments: `{}`}},
	}, msg.ToolCalls)
	require.Equal(t, openai.FinishReasonToolCalls, resp.Choices[0].FinishReason)
	require.Equal(t, 7, resp.Usage.TotalTokens)
}

func TestRedact(t *testing.T) {
	t.Parallel()
	require.Equal(t, "bad key [redacted]", provider.Redact("bad key sk-1", "sk-1"))
	require.Equal(t, "x", provider.Redact("x", ""))
}
