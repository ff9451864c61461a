// Package adapters builds the provider.Adapter for a configured provider kind. It is the
// one place that knows every adapter package, so the router core imports only this.
package adapters

import (
	"fmt"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/anthropic"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/gemini"
	"github.com/switchyard-ai/switchyard/provider-router/internal/provider/openaicompat"
)

// New returns the adapter for cfg.Kind, or an error naming an unknown kind or a config
// the adapter refuses (a missing base URL or key).
func New(cfg provider.Config) (provider.Adapter, error) {
	switch cfg.Kind {
	case provider.OpenAI, provider.OpenRouter, provider.OpenAICompatible:
		return openaicompat.New(cfg)
	case provider.Anthropic:
		return anthropic.New(cfg)
	case provider.Gemini:
		return gemini.New(cfg)
	default:
		return nil, fmt.Errorf("adapters: unknown provider kind %q", cfg.Kind)
	}
}
