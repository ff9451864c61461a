package anthropic_test

import (
	"context"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline/pipelinetest"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/anthropic"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

func newAdapter(t *testing.T, baseURL, apiKey string) provider.Adapter {
	a, err := anthropic.New(provider.Config{Kind: provider.Anthropic, BaseURL: baseURL, APIKey: apiKey})
	require.NoError(t, err)
	return a
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Driver{New: newAdapter, Wire: wire{}, ToolCallIDs: true, RateLimitHeaders: true})
}

// TestConformanceThroughTheRouter passes the suite through the router's whole chain
// (pipeline.New: every link on), so no link changes what the adapter sends or answers.
func TestConformanceThroughTheRouter(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Driver{New: pipelinetest.Start(t).New(provider.Anthropic), Wire: wire{}, ToolCallIDs: true, RateLimitHeaders: true})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := anthropic.New(provider.Config{Kind: provider.Anthropic})
	require.ErrorContains(t, err, "APIKey")
	_, err = anthropic.New(provider.Config{Kind: provider.OpenAI, APIKey: "k"})
	require.Error(t, err)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	f := providertest.NewFake(t, wire{}, providertest.Scenario{Text: "ok", Finish: openai.FinishReasonStop})
	a := newAdapter(t, f.URL, providertest.Key)
	_, err := a.Chat(context.Background(), openai.ChatCompletionRequest{
		Model:       "claude-x",
		Messages:    []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
		Temperature: 1.7,
	})
	require.NoError(t, err)
	got := f.Only(t)
	require.Equal(t, anthropic.DefaultMaxTokens, got.MaxTokens, "max_tokens is required by Anthropic")
	require.InDelta(t, 1.0, *got.Temperature, 1e-9, "OpenAI's 0..2 is clamped to Anthropic's 0..1")
}

func TestOverloadedIsRetryable(t *testing.T) {
	t.Parallel()
	f := providertest.NewFake(t, wire{}, providertest.Scenario{Status: 529, ErrorMessage: "Overloaded"})
	_, err := newAdapter(t, f.URL, providertest.Key).Chat(context.Background(), openai.ChatCompletionRequest{
		Model: "claude-x", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	var pe *provider.Error
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.Retryable)
	require.Equal(t, "overloaded_error", pe.Code)
}

// Cache writes are input the provider bills: they count in prompt_tokens, but only cache
// reads are "cached".
func TestCacheCreationCountsAsPrompt(t *testing.T) {
	t.Parallel()
	f := providertest.NewFake(t, cacheWire{}, providertest.Scenario{Text: "ok", Finish: openai.FinishReasonStop,
		Usage: providertest.Usage{Prompt: 100, Completion: 2, Cached: 30}})
	resp, err := newAdapter(t, f.URL, providertest.Key).Chat(context.Background(), openai.ChatCompletionRequest{
		Model: "claude-x", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	// cacheWire reports input 70 - 20 written to cache = 50 fresh + 20 created + 30 read.
	require.Equal(t, 100, resp.Usage.PromptTokens)
	require.Equal(t, 30, resp.Usage.PromptTokensDetails.CachedTokens)
}

type cacheWire struct{ wire }

func (cacheWire) Answer(w http.ResponseWriter, req providertest.Request, sc providertest.Scenario) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,
		"usage":{"input_tokens":50,"output_tokens":2,"cache_creation_input_tokens":20,"cache_read_input_tokens":30}}`))
}
