package tier

import (
	"context"
	"sync/atomic"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// scoped is the Env one agent of an autonomous run sees. It keys the agent's journal
// entries and step spans under prefix ("" for the execute pattern, whose keys are those of
// every run before patterns existed, so runs in flight still resume; "agent/<i>/" for the
// i-th agent of a pattern), so that agents of one run never share a key; it tags the
// agent's events with agent (0: none); and it drops the events that announce an answer
// (job:plan_created, job:reflection, job:plan_adjusted, job:thinking) when that answer was
// replayed from the journal — the attempt that got it announced it.
//
// One scoped serves one agent, whose phases run one after the other: the announcement
// that follows an answer is the next event the agent emits after its Chat.
type scoped struct {
	Env
	prefix string
	agent  int
	// replayed says whether the agent's latest answer came from the journal.
	replayed atomic.Bool
}

// announcements are the events a replayed answer does not emit again.
var announcements = map[string]bool{event.JobPlanCreated: true, event.JobReflection: true,
	event.JobPlanAdjusted: true, event.JobThinking: true}

func (s *scoped) Chat(ctx context.Context, step, parentSpanID string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	ans, err := s.Env.Chat(ctx, s.prefix+step, parentSpanID, req)
	if err == nil {
		s.replayed.Store(ans.Replayed)
	}
	return ans, err
}

func (s *scoped) StepSpan(ctx context.Context, parentID string, typ span.Type, name, step string, attrs map[string]any) *span.Span {
	return s.Env.StepSpan(ctx, parentID, typ, name, s.prefix+step, attrs)
}

func (s *scoped) CallTool(ctx context.Context, step, parentSpanID string, t tool.Tool, call openai.ToolCall) (string, error) {
	return s.Env.CallTool(ctx, s.prefix+step, parentSpanID, t, call)
}

func (s *scoped) Approval(ctx context.Context, step string, held []Held) (Review, error) {
	return s.Env.Approval(ctx, s.prefix+step, held)
}

func (s *scoped) Event(ctx context.Context, typ string, data any) {
	if announcements[typ] && s.replayed.Load() {
		return
	}
	if m, ok := data.(map[string]any); ok && s.agent > 0 {
		m["agent"] = s.agent
	}
	s.Env.Event(ctx, typ, data)
}

// think emits job:thinking with the reasoning the agent's latest answer gave for phase
// (n: the step it is about, 0: none); an answer without reasoning emits nothing.
func (a *agent) think(ctx context.Context, phase string, n int, reasoning string) {
	if reasoning == "" {
		return
	}
	data := map[string]any{"jobId": a.job.RunID, "phase": phase, "reasoning": reasoning}
	if n > 0 {
		data["agent_step"] = n
	}
	a.env.Event(ctx, event.JobThinking, data)
}
