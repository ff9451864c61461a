// Package openaicompat is the adapter for OpenAI and every server that speaks the OpenAI
// Chat Completions API: OpenRouter, vLLM, Ollama, llama.cpp and sim-llm. Requests and
// answers are already in the router's form, so the adapter only adds streaming assembly,
// rate-limit headers and error mapping.
package openaicompat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Default base URLs of the public endpoints.
const (
	OpenAIBaseURL     = "https://api.openai.com/v1"
	OpenRouterBaseURL = "https://openrouter.ai/api/v1"
)

// Adapter talks to one OpenAI-compatible endpoint. It is safe for concurrent use.
type Adapter struct {
	kind   provider.Kind
	apiKey string
	client *openai.Client
}

var _ provider.Adapter = (*Adapter)(nil)

// New returns an adapter for cfg. Kind must be openai, openrouter or openai_compatible;
// BaseURL defaults to the public endpoint of openai and openrouter and is required for
// openai_compatible, which has no public endpoint. APIKey may be empty for local servers
// (no Authorization header is sent then).
func New(cfg provider.Config) (*Adapter, error) {
	base := cfg.BaseURL
	switch cfg.Kind {
	case provider.OpenAI:
		base = cmp.Or(base, OpenAIBaseURL)
	case provider.OpenRouter:
		base = cmp.Or(base, OpenRouterBaseURL)
	case provider.OpenAICompatible:
		if base == "" {
			return nil, errors.New("openaicompat: BaseURL is required for kind openai_compatible")
		}
	default:
		return nil, fmt.Errorf("openaicompat: unsupported kind %q", cfg.Kind)
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(base, "/")
	oc.HTTPClient = provider.CaptureClient(cfg.HTTPClient)
	return &Adapter{kind: cfg.Kind, apiKey: cfg.APIKey, client: openai.NewClientWithConfig(oc)}, nil
}

// Kind reports the configured kind (openai, openrouter or openai_compatible).
func (a *Adapter) Kind() provider.Kind { return a.kind }

// Chat sends req as is and returns the answer with the rate-limit headers.
func (a *Adapter) Chat(ctx context.Context, req openai.ChatCompletionRequest) (*provider.Response, error) {
	req.Stream = false
	req.StreamOptions = nil
	ctx, sink := provider.WithHeaderSink(ctx)
	resp, err := a.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return nil, a.mapError(ctx, err, sink.Header())
	}
	return &provider.Response{
		ChatCompletionResponse: resp,
		RateLimit:              provider.OpenAIRateLimit(resp.Header()),
	}, nil
}

// ChatStream streams req, asking for the usage chunk (stream_options.include_usage) so the
// router can bill a streamed answer, and returns the assembled answer.
func (a *Adapter) ChatStream(ctx context.Context, req openai.ChatCompletionRequest, fn provider.StreamFunc) (*provider.Response, error) {
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	ctx, sink := provider.WithHeaderSink(ctx)
	stream, err := a.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return nil, a.mapError(ctx, err, sink.Header())
	}
	defer stream.Close()
	rl := provider.OpenAIRateLimit(stream.Header())
	var acc provider.Accumulator
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, a.mapError(ctx, err, stream.Header())
		}
		acc.Add(chunk)
		if fn != nil {
			if err := fn(chunk); err != nil {
				return nil, fmt.Errorf("stream callback: %w", err)
			}
		}
	}
	return &provider.Response{ChatCompletionResponse: acc.Response(), RateLimit: rl}, nil
}

// mapError turns a go-openai error into *provider.Error. A cancelled or expired context is
// returned as the context's error (wrapped), not as a retryable network failure: the
// caller gave up, and retrying would be wrong.
func (a *Adapter) mapError(ctx context.Context, err error, h http.Header) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", a.kind, ctx.Err())
	}
	pe := &provider.Error{Kind: a.kind, RateLimit: provider.OpenAIRateLimit(h), RetryAfter: provider.RetryAfter(h)}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		pe.Status = apiErr.HTTPStatusCode
		pe.Code = codeString(apiErr.Code, apiErr.Type)
		pe.Message = apiErr.Message
		if pe.Status == 0 {
			// An error event inside a 200 stream: the upstream failed mid-answer.
			pe.Retryable = true
		}
	case errors.As(err, &reqErr):
		pe.Status = reqErr.HTTPStatusCode
		pe.Code = http.StatusText(reqErr.HTTPStatusCode)
		pe.Message = strings.TrimSpace(string(reqErr.Body))
		if len(pe.Message) > 512 {
			pe.Message = pe.Message[:512]
		}
	case provider.IsNetwork(err):
		// Transport failure, or a broken stream: another attempt may succeed.
		pe.Code = "network_error"
		pe.Message = err.Error()
		pe.Retryable = true
	default:
		// Refused by the SDK before sending (e.g. its reasoning-model checks): the same
		// request would be refused again.
		pe.Code = "invalid_request"
		pe.Message = err.Error()
	}
	if pe.Status != 0 {
		pe.Retryable = provider.StatusRetryable(pe.Status)
	}
	pe.Message = provider.Redact(pe.Message, a.apiKey)
	pe.Code = provider.Redact(pe.Code, a.apiKey)
	return pe
}

func codeString(code any, typ string) string {
	switch c := code.(type) {
	case string:
		if c != "" {
			return c
		}
	case int:
		return fmt.Sprint(c)
	}
	return typ
}
