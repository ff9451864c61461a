package pipeline

import (
	"context"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// AsAdapter shows a chain as a provider.Adapter of kind, so the provider conformance suite
// (providertest) can drive the whole wrapped stack as it drives a bare adapter. Each Chat
// sends a copy of call with the request set; the request's model is the call's model
// override, as the router's handler makes it.
func AsAdapter(chain Chatter, kind provider.Kind, call func() *Call) provider.Adapter {
	return &chainAdapter{chain: chain, kind: kind, call: call}
}

type chainAdapter struct {
	chain Chatter
	kind  provider.Kind
	call  func() *Call
}

func (a *chainAdapter) Kind() provider.Kind { return a.kind }

func (a *chainAdapter) Chat(ctx context.Context, req openai.ChatCompletionRequest) (*provider.Response, error) {
	return a.send(ctx, req, nil)
}

func (a *chainAdapter) ChatStream(ctx context.Context, req openai.ChatCompletionRequest, fn provider.StreamFunc) (*provider.Response, error) {
	if fn == nil {
		fn = func(openai.ChatCompletionStreamResponse) error { return nil }
	}
	return a.send(ctx, req, fn)
}

func (a *chainAdapter) send(ctx context.Context, req openai.ChatCompletionRequest, fn provider.StreamFunc) (*provider.Response, error) {
	call := a.call()
	call.Req, call.Stream = req, fn
	if call.ModelOverride == "" {
		call.ModelOverride = req.Model
	}
	res, err := a.chain.Chat(ctx, call)
	if err != nil {
		return nil, err
	}
	return res.Resp, nil
}
