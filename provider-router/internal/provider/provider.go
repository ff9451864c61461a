// Package provider is the one interface between the router's core and each LLM provider's
// API. Requests and answers are in the OpenAI Chat Completions form (go-openai types); each
// adapter translates both ways and reports failures as *Error so the router can retry,
// back off or give up without knowing which provider it spoke to. Every adapter passes the
// conformance suite in providertest.
package provider

import (
	"context"
	"fmt"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Kind names an adapter.
type Kind string

// The adapter kinds of the registry's provider_configs.kind.
const (
	OpenAI           Kind = "openai"
	OpenRouter       Kind = "openrouter"
	OpenAICompatible Kind = "openai_compatible"
	Gemini           Kind = "gemini"
	Anthropic        Kind = "anthropic"
)

// Config is what an adapter needs to reach one provider endpoint.
type Config struct {
	Kind    Kind
	BaseURL string // empty: the provider's public endpoint
	APIKey  string // never logged
	// HTTPClient, when set, is used for every request (tests, proxies, timeouts).
	HTTPClient *http.Client
	// Vertex settings for Gemini on Vertex AI (regional endpoints for residency).
	Project  string
	Location string
}

// Response is a provider's answer in OpenAI form, with the rate-limit headers the
// provider sent (x-ratelimit-*, Retry-After) for the router's buckets.
type Response struct {
	openai.ChatCompletionResponse
	RateLimit RateLimit
}

// RateLimit is what a provider said about its own limits, where it said anything.
type RateLimit struct {
	LimitRequests     int
	LimitTokens       int
	RemainingRequests int
	RemainingTokens   int
	ResetRequests     time.Duration
	ResetTokens       time.Duration
	Known             bool
}

// StreamFunc receives each chunk of a streamed answer in OpenAI form.
type StreamFunc func(chunk openai.ChatCompletionStreamResponse) error

// Adapter talks to one provider endpoint.
type Adapter interface {
	Kind() Kind
	// Chat sends one request and returns the whole answer.
	Chat(ctx context.Context, req openai.ChatCompletionRequest) (*Response, error)
	// ChatStream sends one request with streaming, calls fn for each chunk, and returns the
	// assembled answer (content, tool calls, usage) at the end.
	ChatStream(ctx context.Context, req openai.ChatCompletionRequest, fn StreamFunc) (*Response, error)
}

// Error is a provider failure. Retryable tells the router whether another attempt may
// succeed (429, 5xx, network); RetryAfter is what the provider asked for.
type Error struct {
	Kind       Kind
	Status     int // HTTP status; 0 for network errors
	Code       string
	Message    string
	Retryable  bool
	RetryAfter time.Duration
	RateLimit  RateLimit
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: status %d: %s: %s", e.Kind, e.Status, e.Code, e.Message)
}
