package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/adapters"
)

func TestNew(t *testing.T) {
	t.Parallel()
	for _, kind := range []provider.Kind{provider.OpenAI, provider.OpenRouter, provider.OpenAICompatible, provider.Anthropic, provider.Gemini} {
		a, err := adapters.New(provider.Config{Kind: kind, APIKey: "k", BaseURL: "http://127.0.0.1:1"})
		require.NoError(t, err, kind)
		require.Equal(t, kind, a.Kind())
	}
	_, err := adapters.New(provider.Config{Kind: "bedrock"})
	require.ErrorContains(t, err, `unknown provider kind "bedrock"`)
}
