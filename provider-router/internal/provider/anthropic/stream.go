package anthropic

import (
	sdk "github.com/anthropics/anthropic-sdk-go"
	openai "github.com/sashabaranov/go-openai"
)

// translator turns Messages stream events into OpenAI chunks. Anthropic numbers content
// blocks (text and tool_use alike); OpenAI numbers tool calls only, so the translator keeps
// the map from block index to tool call index.
type translator struct {
	id, model string
	created   int64
	toolIndex map[int64]int
	toolArgs  map[int64]bool // whether a tool block sent any argument bytes
	nextTool  int
	finish    openai.FinishReason

	input, cacheRead, cacheCreation, output int64
}

func newTranslator(created int64) *translator {
	return &translator{created: created, toolIndex: map[int64]int{}, toolArgs: map[int64]bool{}}
}

func (t *translator) chunk(d openai.ChatCompletionStreamChoiceDelta, finish openai.FinishReason) openai.ChatCompletionStreamResponse {
	return openai.ChatCompletionStreamResponse{
		ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model,
		Choices: []openai.ChatCompletionStreamChoice{{Index: 0, Delta: d, FinishReason: finish}},
	}
}

func (t *translator) toolDelta(block int64, tc openai.ToolCall) openai.ChatCompletionStreamResponse {
	idx := t.toolIndex[block]
	tc.Index = &idx
	return t.chunk(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{tc}}, "")
}

// event returns the chunks one event stands for (often none).
func (t *translator) event(ev sdk.MessageStreamEventUnion) []openai.ChatCompletionStreamResponse {
	switch ev.Type {
	case "message_start":
		t.id, t.model = ev.Message.ID, string(ev.Message.Model)
		u := ev.Message.Usage
		t.input, t.cacheRead, t.cacheCreation, t.output = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
		return []openai.ChatCompletionStreamResponse{t.chunk(openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}, "")}
	case "content_block_start":
		cb := ev.ContentBlock
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				return []openai.ChatCompletionStreamResponse{t.chunk(openai.ChatCompletionStreamChoiceDelta{Content: cb.Text}, "")}
			}
		case "tool_use":
			t.toolIndex[ev.Index] = t.nextTool
			t.nextTool++
			return []openai.ChatCompletionStreamResponse{t.toolDelta(ev.Index, openai.ToolCall{
				ID: cb.ID, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: cb.Name}})}
		}
	case "content_block_delta":
		d := ev.Delta
		switch d.Type {
		case "text_delta":
			return []openai.ChatCompletionStreamResponse{t.chunk(openai.ChatCompletionStreamChoiceDelta{Content: d.Text}, "")}
		case "thinking_delta":
			return []openai.ChatCompletionStreamResponse{t.chunk(openai.ChatCompletionStreamChoiceDelta{ReasoningContent: d.Thinking}, "")}
		case "input_json_delta":
			if _, ok := t.toolIndex[ev.Index]; !ok || d.PartialJSON == "" {
				return nil
			}
			t.toolArgs[ev.Index] = true
			return []openai.ChatCompletionStreamResponse{t.toolDelta(ev.Index, openai.ToolCall{Function: openai.FunctionCall{Arguments: d.PartialJSON}})}
		}
	case "content_block_stop":
		// A tool without parameters streams no input at all; OpenAI callers expect "{}".
		if _, ok := t.toolIndex[ev.Index]; ok && !t.toolArgs[ev.Index] {
			t.toolArgs[ev.Index] = true
			return []openai.ChatCompletionStreamResponse{t.toolDelta(ev.Index, openai.ToolCall{Function: openai.FunctionCall{Arguments: "{}"}})}
		}
	case "message_delta":
		t.finish = finishReason(ev.Delta.StopReason)
		// message_delta usage is cumulative; input counts appear there on newer API
		// versions and supersede message_start's.
		u := ev.Usage
		t.output = u.OutputTokens
		if u.InputTokens > 0 || u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
			t.input, t.cacheRead, t.cacheCreation = u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens
		}
		return []openai.ChatCompletionStreamResponse{t.chunk(openai.ChatCompletionStreamChoiceDelta{}, t.finish)}
	case "message_stop":
		// Like OpenAI with include_usage: a last chunk without choices carries the usage.
		u := usage(t.input, t.cacheRead, t.cacheCreation, t.output)
		return []openai.ChatCompletionStreamResponse{{ID: t.id, Object: "chat.completion.chunk", Created: t.created,
			Model: t.model, Choices: []openai.ChatCompletionStreamChoice{}, Usage: &u}}
	}
	return nil
}
