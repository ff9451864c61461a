package provider

import (
	"sort"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// Accumulator assembles streamed chunks in OpenAI form into the whole answer: content
// concatenated, tool calls merged by index (id and name from the first delta, arguments
// appended), the last finish reason, and the usage of the include_usage chunk. Every
// adapter streams through one, so ChatStream answers are built the same way everywhere.
type Accumulator struct {
	id, model string
	created   int64
	content   strings.Builder
	reasoning strings.Builder
	calls     map[int]*openai.ToolCall
	finish    openai.FinishReason
	usage     openai.Usage
}

// Add folds one chunk into the answer.
func (a *Accumulator) Add(c openai.ChatCompletionStreamResponse) {
	if a.id == "" {
		a.id = c.ID
	}
	if a.model == "" {
		a.model = c.Model
	}
	if a.created == 0 {
		a.created = c.Created
	}
	if c.Usage != nil {
		a.usage = *c.Usage
	}
	for _, ch := range c.Choices {
		// Only the first choice is assembled: the router never asks for n > 1.
		if ch.Index != 0 {
			continue
		}
		a.content.WriteString(ch.Delta.Content)
		a.reasoning.WriteString(ch.Delta.ReasoningContent)
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
		for i, tc := range ch.Delta.ToolCalls {
			idx := i
			if tc.Index != nil {
				idx = *tc.Index
			}
			if a.calls == nil {
				a.calls = map[int]*openai.ToolCall{}
			}
			cur, ok := a.calls[idx]
			if !ok {
				cur = &openai.ToolCall{Type: openai.ToolTypeFunction}
				a.calls[idx] = cur
			}
			if tc.ID != "" {
				cur.ID = tc.ID
			}
			if tc.Function.Name != "" {
				cur.Function.Name = tc.Function.Name
			}
			cur.Function.Arguments += tc.Function.Arguments
		}
	}
}

// Response returns the answer assembled so far.
func (a *Accumulator) Response() openai.ChatCompletionResponse {
	msg := openai.ChatCompletionMessage{
		Role:             openai.ChatMessageRoleAssistant,
		Content:          a.content.String(),
		ReasoningContent: a.reasoning.String(),
	}
	idxs := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for _, i := range idxs {
		tc := *a.calls[i]
		tc.Index = nil // the index is a streaming artefact; whole answers carry none
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	return openai.ChatCompletionResponse{
		ID:      a.id,
		Object:  "chat.completion",
		Created: a.created,
		Model:   a.model,
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: a.finish}},
		Usage:   a.usage,
	}
}
