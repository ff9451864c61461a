package openaicompat_test

import (
	"context"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/pipeline/pipelinetest"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/openaicompat"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/providertest"
)

func newAdapter(kind provider.Kind) func(t *testing.T, baseURL, apiKey string) provider.Adapter {
	return func(t *testing.T, baseURL, apiKey string) provider.Adapter {
		a, err := openaicompat.New(provider.Config{Kind: kind, BaseURL: baseURL, APIKey: apiKey})
		require.NoError(t, err)
		return a
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, kind := range []provider.Kind{provider.OpenAI, provider.OpenRouter, provider.OpenAICompatible} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, providertest.Driver{New: newAdapter(kind), Wire: wire{}, ToolCallIDs: true, RateLimitHeaders: true})
		})
	}
}

// TestConformanceThroughTheRouter passes the suite through the router's whole chain
// (pipeline.New: every link on), so no link changes what an adapter sends or answers.
func TestConformanceThroughTheRouter(t *testing.T) {
	t.Parallel()
	stack := pipelinetest.Start(t)
	for _, kind := range []provider.Kind{provider.OpenAI, provider.OpenAICompatible} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, providertest.Driver{New: stack.New(kind), Wire: wire{}, ToolCallIDs: true, RateLimitHeaders: true})
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := openaicompat.New(provider.Config{Kind: provider.OpenAICompatible})
	require.ErrorContains(t, err, "BaseURL is required")
	_, err = openaicompat.New(provider.Config{Kind: provider.Gemini})
	require.Error(t, err)
	a, err := openaicompat.New(provider.Config{Kind: provider.OpenAI, APIKey: "k"})
	require.NoError(t, err)
	require.Equal(t, provider.OpenAI, a.Kind())
}

// A local server without a key gets no Authorization header at all, not "Bearer ".
func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	var got http.Header
	f := providertest.NewFake(t, headerWire{wire: wire{}, got: &got}, providertest.Scenario{Text: "ok", Finish: openai.FinishReasonStop})
	a, err := openaicompat.New(provider.Config{Kind: provider.OpenAICompatible, BaseURL: f.URL})
	require.NoError(t, err)
	_, err = a.Chat(context.Background(), openai.ChatCompletionRequest{Model: "llama", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	<-f.Arrived()
	require.Empty(t, got.Get("Authorization"))
}

type headerWire struct {
	wire
	got *http.Header
}

func (h headerWire) Decode(r *http.Request, body []byte) (providertest.Request, error) {
	*h.got = r.Header.Clone()
	return h.wire.Decode(r, body)
}
