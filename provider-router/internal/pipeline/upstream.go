package pipeline

import (
	"context"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Upstream is the end of the chain: one attempt at the provider through call.Adapter. It
// sets call.Latency, the attempt's time at the provider.
type Upstream struct{}

// Chat sends the request once.
func (Upstream) Chat(ctx context.Context, call *Call) (*Result, error) {
	started := time.Now()
	var res Result
	var err error
	if call.Stream != nil {
		res.Resp, err = call.Adapter.ChatStream(ctx, call.Req, func(c openai.ChatCompletionStreamResponse) error {
			call.streamed = true // a chunk went out: another attempt would repeat it
			return call.Stream(c)
		})
	} else {
		res.Resp, err = call.Adapter.Chat(ctx, call.Req)
	}
	call.Latency = time.Since(started)
	if err != nil {
		return nil, err
	}
	return &res, nil
}
