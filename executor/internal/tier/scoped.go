package tier

import (
	"context"
	"slices"
	"sync"

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
// agent's events with agent (0: none); and it makes each announcement of an answer
// (job:plan_created, job:reflection, job:plan_adjusted, job:thinking) reach the run's
// events once across attempts. An announcement carries the journal step key of the answer
// it announces (data's "announces", with the prefix). A fresh answer is always announced;
// one replayed from the journal is announced only when the run's events lack its
// announcement (Announcements), as when the attempt that got the answer was killed before
// its events were written. Under an Env that cannot tell, a replayed answer is not
// announced again.
//
// One scoped serves one agent, whose phases run one after the other: the announcement
// that follows an answer is the next event the agent emits after its Chat.
type scoped struct {
	Env
	prefix string
	agent  int

	mu sync.Mutex
	// latest is the journal step key of the agent's latest answer, replayed whether it
	// came from the journal.
	latest   string
	replayed bool
}

// Announcements is what an Env offers when it can say which announcements the run's events
// hold already. It is optional (see scoped).
type Announcements interface {
	// Announced reports whether the run's events hold an event of type typ announcing the
	// answer journaled under step. When it cannot tell (its read failed), it reports false:
	// an announcement written twice is recognisable by its key, one never written is lost.
	Announced(ctx context.Context, typ, step string) bool
}

// AnnouncementTypes are the events that announce an answer.
var AnnouncementTypes = []string{event.JobPlanCreated, event.JobReflection, event.JobPlanAdjusted, event.JobThinking}

func (s *scoped) Chat(ctx context.Context, step, parentSpanID string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	ans, err := s.Env.Chat(ctx, s.prefix+step, parentSpanID, req)
	if err == nil {
		s.mu.Lock()
		s.latest, s.replayed = s.prefix+step, ans.Replayed
		s.mu.Unlock()
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
	m, _ := data.(map[string]any)
	if slices.Contains(AnnouncementTypes, typ) {
		s.mu.Lock()
		step, replayed := s.latest, s.replayed
		s.mu.Unlock()
		if replayed && !s.unannounced(ctx, typ, step) {
			return
		}
		if m != nil && step != "" {
			m["announces"] = step
		}
	}
	if m != nil && s.agent > 0 {
		m["agent"] = s.agent
	}
	s.Env.Event(ctx, typ, data)
}

// unannounced reports whether the run's events lack the announcement of type typ of the
// replayed answer under step; an Env that cannot tell has it announced by the attempt that
// got the answer.
func (s *scoped) unannounced(ctx context.Context, typ, step string) bool {
	a, ok := s.Env.(Announcements)
	return ok && !a.Announced(ctx, typ, step)
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
