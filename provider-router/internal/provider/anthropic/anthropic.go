// Package anthropic is the adapter for Anthropic's Messages API. It translates the
// router's OpenAI-form requests into Messages requests (system prompt, content blocks,
// tool_use/tool_result, tool_choice, structured output) and the answers and stream events
// back into ChatCompletions and chunks.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Adapter talks to one Anthropic endpoint. It is safe for concurrent use.
type Adapter struct {
	apiKey string
	client sdk.Client
	now    func() time.Time
}

var _ provider.Adapter = (*Adapter)(nil)

// New returns an adapter for cfg (Kind anthropic). BaseURL defaults to the public API.
// The SDK's own retries are off: the router retries, with its rate limits and budgets in
// view, and an adapter that retried too would multiply attempts. Environment variables
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) are ignored: credentials come from the registry.
func New(cfg provider.Config) (*Adapter, error) {
	if cfg.Kind != provider.Anthropic {
		return nil, fmt.Errorf("anthropic: unsupported kind %q", cfg.Kind)
	}
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic: APIKey is required")
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
		option.WithHTTPClient(provider.CaptureClient(cfg.HTTPClient)),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(strings.TrimRight(cfg.BaseURL, "/")+"/"))
	}
	return &Adapter{apiKey: cfg.APIKey, client: sdk.NewClient(opts...), now: time.Now}, nil
}

// Kind reports provider.Anthropic.
func (a *Adapter) Kind() provider.Kind { return provider.Anthropic }

// Chat sends one Messages request and translates the answer.
func (a *Adapter) Chat(ctx context.Context, req openai.ChatCompletionRequest) (*provider.Response, error) {
	params, err := toParams(req)
	if err != nil {
		return nil, a.invalid(err)
	}
	ctx, sink := provider.WithHeaderSink(ctx)
	msg, err := a.client.Messages.New(ctx, params)
	if err != nil {
		return nil, a.mapError(ctx, err, sink.Header())
	}
	return &provider.Response{
		ChatCompletionResponse: fromMessage(msg, a.now().Unix()),
		RateLimit:              provider.AnthropicRateLimit(sink.Header()),
	}, nil
}

// ChatStream streams one Messages request, passing each event on as an OpenAI chunk.
func (a *Adapter) ChatStream(ctx context.Context, req openai.ChatCompletionRequest, fn provider.StreamFunc) (*provider.Response, error) {
	params, err := toParams(req)
	if err != nil {
		return nil, a.invalid(err)
	}
	ctx, sink := provider.WithHeaderSink(ctx)
	stream := a.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()

	t := newTranslator(a.now().Unix())
	var acc provider.Accumulator
	for stream.Next() {
		for _, chunk := range t.event(stream.Current()) {
			acc.Add(chunk)
			if fn != nil {
				if err := fn(chunk); err != nil {
					return nil, fmt.Errorf("stream callback: %w", err)
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, a.mapError(ctx, err, sink.Header())
	}
	return &provider.Response{ChatCompletionResponse: acc.Response(), RateLimit: provider.AnthropicRateLimit(sink.Header())}, nil
}

// invalid reports a request that cannot be translated: sending it again will not help.
func (a *Adapter) invalid(err error) error {
	return &provider.Error{Kind: provider.Anthropic, Code: "invalid_request", Message: provider.Redact(err.Error(), a.apiKey)}
}

// mapError turns an SDK error into *provider.Error; a cancelled context stays a context
// error, because the caller gave up and must not be retried.
func (a *Adapter) mapError(ctx context.Context, err error, h http.Header) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %w", ctx.Err())
	}
	pe := &provider.Error{Kind: provider.Anthropic}
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		pe.Status = apiErr.StatusCode
		pe.Code, pe.Message = errorBody(apiErr.RawJSON())
		pe.Retryable = provider.StatusRetryable(pe.Status)
	case strings.Contains(err.Error(), "received error while streaming"):
		// An error event inside a 200 stream (overloaded_error mid-answer).
		pe.Code, pe.Message = errorBody(strings.TrimPrefix(err.Error(), "received error while streaming: "))
		pe.Retryable = true
	case provider.IsNetwork(err):
		pe.Code, pe.Message, pe.Retryable = "network_error", err.Error(), true
	default:
		pe.Code, pe.Message = "invalid_request", err.Error()
	}
	pe.RateLimit = provider.AnthropicRateLimit(h)
	pe.RetryAfter = provider.RetryAfter(h)
	pe.Message = provider.Redact(pe.Message, a.apiKey)
	pe.Code = provider.Redact(pe.Code, a.apiKey)
	return pe
}

// errorBody reads Anthropic's {"type":"error","error":{"type":...,"message":...}}.
func errorBody(raw string) (code, message string) {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) != nil || body.Error.Type == "" {
		if len(raw) > 512 {
			raw = raw[:512]
		}
		return "unknown_error", raw
	}
	return body.Error.Type, body.Error.Message
}
