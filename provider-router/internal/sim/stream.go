package sim

import (
	"encoding/json"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// streamChunk is openai.ChatCompletionStreamResponse as OpenAI itself sends it. The
// go-openai type would add Azure's content_filter_results to every choice, about 300
// bytes per token, which distorts streaming benchmarks; the nested types are go-openai's.
type streamChunk struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	SystemFingerprint string         `json:"system_fingerprint"`
	Choices           []streamChoice `json:"choices"`
	Usage             *openai.Usage  `json:"usage,omitempty"`
}

type streamChoice struct {
	Index        int                                    `json:"index"`
	Delta        openai.ChatCompletionStreamChoiceDelta `json:"delta"`
	FinishReason openai.FinishReason                    `json:"finish_reason"`
}

// streamPlan is one streamed answer and its timing.
type streamPlan struct {
	id           string
	model        string
	a            answer
	latency      time.Duration // the whole answer, already time-scaled
	ttft         float64       // share of latency before the first token
	includeUsage bool
}

// stream writes the answer as OpenAI server-sent events: a first chunk with the role (and
// the tool call's id and name), one chunk per output token, a chunk with finish_reason, a
// usage chunk when stream_options.include_usage asked for it, then "data: [DONE]".
//
// Timing: the first chunk goes out after ttft×latency; the tokens are spread evenly over
// the rest, the last arriving at latency. Each chunk waits for its deadline measured from
// the start, so slow writes do not add up into drift. It reports whether the whole stream
// was written; false means the client went away.
func (s *Server) stream(r *http.Request, w http.ResponseWriter, p streamPlan) bool {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	// Headers (status, rate-limit state) go out now, as OpenAI's do, not with the first
	// token: a client can tell "accepted, thinking" from "not answered yet".
	if rc.Flush() != nil {
		return false
	}

	start := time.Now()
	ttft := time.Duration(float64(p.latency) * p.ttft)
	rest := p.latency - ttft
	created := start.Unix()
	chunk := func(delta openai.ChatCompletionStreamChoiceDelta, finish openai.FinishReason) streamChunk {
		return streamChunk{
			ID:                p.id,
			Object:            "chat.completion.chunk",
			Created:           created,
			Model:             p.model,
			SystemFingerprint: systemFingerprint,
			Choices:           []streamChoice{{Index: 0, Delta: delta, FinishReason: finish}},
		}
	}
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			s.log.Error("encoding stream chunk", "err", err)
			return false
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	waitUntil := func(offset time.Duration) bool {
		return waitFor(ctx, time.Until(start.Add(offset)))
	}

	zero := 0
	first := openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}
	if len(p.a.toolCalls) > 0 {
		tc := p.a.toolCalls[0]
		first.ToolCalls = []openai.ToolCall{{Index: &zero, ID: tc.ID, Type: tc.Type, Function: openai.FunctionCall{Name: tc.Function.Name}}}
	}
	if !waitUntil(ttft) || !send(chunk(first, "")) {
		return false
	}
	n := len(p.a.pieces)
	for i, piece := range p.a.pieces {
		at := ttft
		if n > 1 {
			at += time.Duration(float64(rest) * float64(i) / float64(n-1))
		}
		if !waitUntil(at) {
			return false
		}
		var d openai.ChatCompletionStreamChoiceDelta
		if len(p.a.toolCalls) > 0 {
			// Type is repeated on every fragment: clients that validate it reject "".
			k := p.a.callOf[i]
			tc := openai.ToolCall{Index: &k, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Arguments: piece}}
			if k > 0 && p.a.callOf[i-1] != k {
				// The first fragment of every further call carries its id and name, as
				// OpenAI's parallel tool calls do.
				tc.ID, tc.Function.Name = p.a.toolCalls[k].ID, p.a.toolCalls[k].Function.Name
			}
			d.ToolCalls = []openai.ToolCall{tc}
		} else {
			d.Content = piece
		}
		if !send(chunk(d, "")) {
			return false
		}
	}
	if !waitUntil(p.latency) || !send(chunk(openai.ChatCompletionStreamChoiceDelta{}, p.a.finish)) {
		return false
	}
	if p.includeUsage {
		u := p.a.usage()
		last := chunk(openai.ChatCompletionStreamChoiceDelta{}, "")
		last.Choices = []streamChoice{}
		last.Usage = &u
		if !send(last) {
			return false
		}
	}
	if _, err := w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return false
	}
	return rc.Flush() == nil
}
