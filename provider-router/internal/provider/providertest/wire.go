// Package providertest is the conformance suite every provider.Adapter passes. Each adapter
// package supplies a Wire: a fake upstream that decodes requests in its provider's wire
// format into the neutral Request below and answers a neutral Scenario in that format. The
// suite then drives every adapter through the same cases and asserts the same OpenAI-form
// results, so "the router cannot tell which provider it spoke to" is tested, not hoped.
// (The model is River's riverdrivertest.)
package providertest

import (
	"encoding/json"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// Wire is a fake upstream speaking one provider's wire format.
type Wire interface {
	// Decode reads a request the adapter sent into neutral form. An error fails the test:
	// the adapter sent something its provider would not accept.
	Decode(r *http.Request, body []byte) (Request, error)
	// Answer writes sc as a successful answer: an SSE stream when req.Stream, else JSON.
	Answer(w http.ResponseWriter, req Request, sc Scenario)
	// Fail writes sc.Status with the provider's error body, sc.ErrorMessage as message,
	// and sc.RetryAfter the way the provider tells it.
	Fail(w http.ResponseWriter, req Request, sc Scenario)
}

// Scenario is what the fake upstream answers, independent of any provider.
type Scenario struct {
	// Text is the answer's text. When streaming, TextChunks (if set) are its pieces, sent
	// as separate events; they must join to Text.
	Text       string
	TextChunks []string
	// ToolCalls are the calls the model makes. Arguments is a JSON object.
	ToolCalls []ToolCall
	// Finish is the OpenAI finish reason the answer stands for: stop, length or tool_calls.
	Finish openai.FinishReason
	// Usage is in OpenAI terms: Prompt includes Cached.
	Usage Usage
	// RateLimit, when Known, is sent in the provider's rate-limit headers.
	RateLimit provider.RateLimit

	// Status, when non-zero, makes the upstream fail with this HTTP status.
	Status       int
	ErrorMessage string
	RetryAfter   time.Duration

	// Hang makes the upstream hold the request until the client goes away.
	Hang bool
}

// ToolCall is a tool call in neutral form.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is token usage in OpenAI terms.
type Usage struct {
	Prompt, Completion, Cached int
}

// Request is what the adapter sent, decoded from the provider's wire format.
type Request struct {
	APIKey string // from the provider's auth header (Authorization, x-api-key, x-goog-api-key)
	Model  string
	Stream bool
	// System is every system instruction, joined with "\n".
	System   string
	Messages []Message
	Tools    []Tool
	// ToolChoice is "", "auto", "required", "none" or "function:<name>".
	ToolChoice string
	// JSON is "", "json_object" or "json_schema"; JSONSchema is the schema sent, if any.
	JSON        string
	JSONSchema  json.RawMessage
	MaxTokens   int
	Temperature *float64
	Stop        []string
}

// Message is one turn in neutral form. Role is "user", "assistant" or "tool"; a "tool"
// message holds the results of consecutive tool calls, however the provider groups them.
type Message struct {
	Role        string
	Text        string
	ToolCalls   []ToolCall
	ToolResults []ToolResult
}

// ToolResult is a tool's answer in neutral form. Content is the text the tool returned.
type ToolResult struct {
	CallID  string
	Name    string
	Content string
}

// Tool is a tool definition in neutral form.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// SplitArguments cuts a tool call's JSON arguments into n pieces, so fakes can stream
// them the way providers do (as fragments that only parse once joined).
func SplitArguments(args string, n int) []string {
	if n <= 1 || len(args) < n {
		return []string{args}
	}
	size := len(args) / n
	var parts []string
	for i := 0; i < n-1; i++ {
		parts = append(parts, args[i*size:(i+1)*size])
	}
	return append(parts, args[(n-1)*size:])
}

// Chunks returns the text pieces a stream should send: sc.TextChunks, else the whole text.
func (sc Scenario) Chunks() []string {
	if len(sc.TextChunks) > 0 {
		return sc.TextChunks
	}
	if sc.Text == "" {
		return nil
	}
	return []string{sc.Text}
}
