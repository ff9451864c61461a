// Package tier holds the execution tiers — llm_only, tool_using (ReAct), and later chain
// steps and autonomous runs. A tier decides what to ask the LLM and what to do with the
// answer; everything durable (journal, spans, events, billing) is done by the Env the
// runner hands it, so a tier never touches Postgres or Redis itself.
package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/payload"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// Job is what a tier sees of the run it executes.
type Job struct {
	RunID, OrgID, TraceID, JobType, UserID string
	Skill                                  skill.Skill
	Payload                                json.RawMessage
	// RootSpanID is the span the tier's spans hang under.
	RootSpanID string
	// CostCeilingUSD is the run's hard cost ceiling (nil: none).
	CostCeilingUSD *float64
}

// Price is what a million tokens cost, in USD.
type Price struct {
	InputPerMTok, OutputPerMTok float64
}

// Env is what the runner offers a tier.
type Env interface {
	// Chat asks the LLM through the router. The answer is journaled under step before Chat
	// returns; if step is journaled already (a resumed run), that answer is returned and the
	// router is not called again.
	Chat(ctx context.Context, step, parentSpanID string, req openai.ChatCompletionRequest) (*routerclient.Answer, error)
	// StartSpan records a new running span with its first attributes (nil: none) and
	// returns it; EndSpan records its end.
	StartSpan(ctx context.Context, parentID string, typ span.Type, name string, attrs map[string]any) *span.Span
	// StepSpan is StartSpan for a span that groups the steps under step (a ReAct
	// iteration, "iter/2"): the span has attribute step, and a resumed run gets back the
	// span an earlier attempt made for the same step instead of a second one.
	StepSpan(ctx context.Context, parentID string, typ span.Type, name, step string, attrs map[string]any) *span.Span
	EndSpan(ctx context.Context, s *span.Span, st span.Status)
	// Event journals and publishes an event of the run.
	Event(ctx context.Context, typ string, data any)

	// Tools returns the tools offered to the run: those the skill lists that are registered
	// and granted to the organisation.
	Tools(ctx context.Context) ([]tool.Tool, error)
	// CallTool performs one tool call of an LLM answer and returns the tool message's
	// content. The result is journaled under step before CallTool returns; a journaled step
	// is replayed, and a side-effecting call whose idempotency key is in the ledger is never
	// sent again. Tool failures are content for the LLM; the error is only for the run's
	// end (cancellation, timeout) or a broken store.
	CallTool(ctx context.Context, step, parentSpanID string, t tool.Tool, call openai.ToolCall) (string, error)
	// Approval returns the reviewers' decision on the calls held under step. Pending means
	// no decision yet: the runner pauses the run (pending_review) when the tier returns.
	Approval(ctx context.Context, step string, held []Held) (Review, error)
	// CheckCancel returns ErrCancelled when cancellation of the run was requested.
	CheckCancel(ctx context.Context) error
	// CallPrice returns the price of the model the router routes the run's calls to (the
	// organisation's policy for the skill's routing hint, or its model_override); ok is
	// false when that model has no price. A multi-agent pattern estimates its worst case
	// with it.
	CallPrice(ctx context.Context) (p Price, ok bool, err error)
}

// Held is a tool call waiting for approval.
type Held struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"call_id"`
	Arguments json.RawMessage `json:"arguments"`
}

// Review is a reviewer's answer to held tool calls: the decision and, for a rejection, the
// reason the reviewer gave (which the autonomous tier hands the agent as the tool result).
type Review struct {
	Decision Decision
	Reason   string
}

// Decision is a reviewer's answer to held tool calls.
type Decision string

// The decisions.
const (
	Pending  Decision = "pending"
	Approved Decision = "approve"
	Rejected Decision = "reject"
)

// ErrCancelled is returned when the run's cancellation was requested.
var ErrCancelled = errors.New("run cancelled")

// Outcome is how a tier ended.
type Outcome struct {
	Status   run.Status
	Output   map[string]any
	Warnings []string
	// Held lists the tool calls a PendingReview outcome waits on (its Output then says why:
	// the model's text beside the calls as "reasoning" and, for an agent, its step); Reason
	// explains a Rejected outcome.
	Held   []Held
	Reason string
}

// PermanentError is a failure no retry can change, with its public code and, optionally,
// what to do about it and the figures behind it (the run's error carries both).
type PermanentError struct {
	Code            string
	Message         string
	Troubleshooting []string
	Context         map[string]any
}

func (e *PermanentError) Error() string { return e.Code + ": " + e.Message }

// Permanent returns a PermanentError.
func Permanent(code, format string, args ...any) error {
	return &PermanentError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// chatPayload is how the tiers read a chat payload (shared/payload checks its shape first):
// either messages in OpenAI form, or a prompt (or input) string that becomes one user
// message.
type chatPayload struct {
	Messages []openai.ChatCompletionMessage `json:"messages"`
	Prompt   string                         `json:"prompt"`
	Input    string                         `json:"input"`
}

// Messages builds the conversation: the skill's system prompt, then the payload's messages.
// A payload of the wrong shape is a permanent INVALID_PAYLOAD naming every wrong field, in
// the words the dispatcher uses to refuse it at dispatch.
func Messages(sk skill.Skill, raw json.RawMessage) ([]openai.ChatCompletionMessage, error) {
	if problems := payload.CheckChat(raw); len(problems) > 0 {
		return nil, Permanent(apierr.CodeInvalidPayload, "%s", payload.Describe(problems))
	}
	var p chatPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		// The check above accepts only what decodes; this is a guard, and its message
		// keeps the decoder's Go types out of the run's error.
		return nil, Permanent(apierr.CodeInvalidPayload, "payload does not have the shape llm_only and tool_using take (docs/api.md)")
	}
	var msgs []openai.ChatCompletionMessage
	if sk.SystemPrompt != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: sk.SystemPrompt})
	}
	switch {
	case len(p.Messages) > 0:
		msgs = append(msgs, p.Messages...)
	case p.Prompt != "":
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: p.Prompt})
	default:
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: p.Input})
	}
	return msgs, nil
}

// baseRequest is the chat request a skill implies.
func baseRequest(sk skill.Skill, msgs []openai.ChatCompletionMessage) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: sk.ModelOverride, Messages: msgs, MaxTokens: sk.MaxTokens}
	if sk.Temperature != nil {
		req.Temperature = float32(*sk.Temperature)
	}
	return req
}
