package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/executor/internal/tier"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// llmEntry is the journal form of an LLM answer.
type llmEntry struct {
	SpanID string              `json:"span_id"`
	Answer routerclient.Answer `json:"answer"`
}

// chainPending is, for a chain step, how many of its chain's steps are not yet dispatched
// (the router may order waiting calls by what remains of their chain); 0 when unknown: the
// call goes on without it.
func (x *execution) chainPending(ctx context.Context) int {
	if x.run.ChainID == "" {
		return 0
	}
	n, err := x.runs().PendingSteps(ctx, x.run.ChainID)
	if err != nil {
		x.log.Warn("reading the chain's pending steps", "chain_id", x.run.ChainID, "error", err)
		return 0
	}
	return n
}

// probedProvider is the provider a "Test connection" probe run is pinned to: its
// payload's provider, for the probe's job type only; "" for every other run.
func (x *execution) probedProvider() string {
	if x.run.JobType != apitypes.ProviderTestJobType {
		return ""
	}
	var p apitypes.ProviderTestPayload
	if err := json.Unmarshal(x.run.Payload, &p); err != nil {
		return ""
	}
	return p.Provider
}

// Chat implements tier.Env: journal before effect, replay instead of calling again. A paid
// answer is held until it is journaled: a failed journal write is retried while the
// attempt has time, and the call carries its step key (X-Step-Key) so that the router can
// answer a repeated call of the step from its first answer.
func (x *execution) Chat(ctx context.Context, step, parentSpanID string, req openai.ChatCompletionRequest) (*routerclient.Answer, error) {
	rn := x.run
	var prior llmEntry
	if ok, err := x.journaled(ctx, step, &prior); err != nil {
		return nil, err
	} else if ok {
		x.log.Info("llm answer replayed from journal", "step", step)
		x.Metrics.LLMReplayed()
		prior.Answer.Replayed = true
		return &prior.Answer, nil
	}

	sp := x.StartSpan(ctx, parentSpanID, span.LLMCall, "llm "+step,
		map[string]any{"step": step, "routing_hint": x.skill.RoutingHint})
	x.Event(ctx, event.JobLLMCall, map[string]any{"step": step, "span_id": sp.ID,
		"routing_hint": x.skill.RoutingHint, "messages": len(req.Messages), "tools": len(req.Tools)})

	x.flush(ctx)
	var queueWait int64
	if rn.QueuedAt != nil {
		queueWait = time.Since(*rn.QueuedAt).Milliseconds()
	}
	started := time.Now()
	ans, err := x.Router.Chat(ctx, routerclient.Job{ChainPending: x.chainPending(ctx),
		OrgID: rn.OrgID, JobID: rn.ID, TraceID: rn.TraceID, UserID: rn.UserID, JobType: rn.JobType,
		ChainID: rn.ChainID, RoutingHint: x.skill.RoutingHint, ModelOverride: x.skill.ModelOverride,
		Residency: x.skill.DataResidency, Priority: rn.Priority, CostCeilingUSD: rn.CostCeilingUSD,
		QueueWaitMS: queueWait, CapacityWait: x.capacityWait(), StepKey: step, SpanID: sp.ID,
		Provider: x.probedProvider(),
	}, req)
	if err != nil {
		x.Metrics.LLMCall(errorCode(err), time.Since(started))
		sp.Set("error", errorCode(err))
		x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return nil, err
	}
	x.Metrics.LLMCall("ok", time.Since(started))
	sp.Set("latency_ms", float64(time.Since(started).Microseconds())/1000)

	// Journal the answer and add it to the run's totals in one statement, before anything
	// else happens: a retry from here on replays it instead of paying for it again. When the
	// step was journaled already (by an attempt racing this one) nothing is added twice.
	var total runstore.Totals
	entry, err := json.Marshal(llmEntry{SpanID: sp.ID, Answer: *ans})
	if err == nil {
		use := runstore.Usage{TokensIn: int64(ans.Usage.PromptTokens), TokensOut: int64(ans.Usage.CompletionTokens),
			TokensCached: cachedTokens(ans), CostUSD: ans.CostUSD}
		err = x.persist(ctx, "llm_answer", step, func(ctx context.Context) error {
			var err error
			total, _, err = x.runs().JournalLLMAnswer(ctx, rn.ID, step, use, entry)
			return err
		})
	}
	if err != nil {
		x.EndSpan(context.WithoutCancel(ctx), sp.Set("error", apierr.CodeJournalUnavailable), span.Error)
		return nil, err
	}
	sp.Billing = &span.Billing{Provider: ans.Provider, Model: ans.Model, TokensIn: int64(ans.Usage.PromptTokens),
		TokensOut: int64(ans.Usage.CompletionTokens), TokensCached: cachedTokens(ans), CostUSD: ans.CostUSD}
	finish := ""
	if len(ans.Choices) > 0 {
		finish = string(ans.Choices[0].FinishReason)
	}
	x.EndSpan(ctx, sp.Set("finish_reason", finish), span.OK)
	x.Event(ctx, event.JobLLMResponse, map[string]any{"step": step, "span_id": sp.ID, "provider": ans.Provider,
		"model": ans.Model, "tokens_in": ans.Usage.PromptTokens, "tokens_out": ans.Usage.CompletionTokens,
		"cost_usd": ans.CostUSD, "finish_reason": finish, "cumulative": total})
	return ans, nil
}

func cachedTokens(a *routerclient.Answer) int64 {
	if a.Usage.PromptTokensDetails != nil {
		return int64(a.Usage.PromptTokensDetails.CachedTokens)
	}
	return 0
}

func errorCode(err error) string {
	code, _, _ := classify(err)
	return code
}

// StartSpan implements tier.Env. The span carries the attempt that makes it.
func (x *execution) StartSpan(ctx context.Context, parentID string, typ span.Type, name string, attrs map[string]any) *span.Span {
	sp := span.Start(x.run.ID, x.run.OrgID, x.run.TraceID, parentID, typ, name)
	sp.ChainID = x.run.ChainID
	sp.Attempt = x.attempt
	for k, v := range attrs {
		sp.Set(k, v)
	}
	x.saveSpan(ctx, sp)
	return sp
}

// StepSpan implements tier.Env. A resumed attempt gets back the span an earlier attempt made
// for the same step: one it finished is kept as it is (its steps are replayed, and EndSpan
// leaves it alone); one it left running, abandoned or failed is reopened by this attempt
// (attribute resumed_by_attempt) and ended by it. Either way the step has one span, named
// and numbered by the step.
func (x *execution) StepSpan(ctx context.Context, parentID string, typ span.Type, name, step string, attrs map[string]any) *span.Span {
	x.spans.mu.Lock()
	prior, ok := x.spans.earlier[stepSpanKey(typ, step)]
	if ok && prior.Status == span.OK {
		x.spans.kept[prior.ID] = true
	}
	x.spans.mu.Unlock()
	if !ok {
		a := make(map[string]any, len(attrs)+1)
		maps.Copy(a, attrs)
		a["step"] = step
		return x.StartSpan(ctx, parentID, typ, name, a)
	}
	sp := prior
	sp.Attributes = maps.Clone(prior.Attributes)
	if sp.Status == span.OK {
		return &sp
	}
	sp.Status, sp.EndedAt, sp.DurationMS = span.Running, nil, nil
	delete(sp.Attributes, "abandoned_by_attempt")
	for k, v := range attrs {
		sp.Set(k, v)
	}
	x.saveSpan(ctx, sp.Set("resumed_by_attempt", x.attempt))
	return &sp
}

func stepSpanKey(typ span.Type, step string) string { return string(typ) + " " + step }

// EndSpan implements tier.Env.
func (x *execution) EndSpan(ctx context.Context, sp *span.Span, st span.Status) {
	x.spans.mu.Lock()
	kept := x.spans.kept[sp.ID]
	x.spans.mu.Unlock()
	if kept {
		return
	}
	x.saveSpan(ctx, sp.End(st))
}

// stepSpans are what a resumed attempt knows of the spans earlier attempts made.
type stepSpans struct {
	mu sync.Mutex
	// earlier holds the earlier attempts' spans that carry a step, by stepSpanKey; the
	// first made wins.
	earlier map[string]span.Span
	// kept are spans finished by an earlier attempt and handed out again by StepSpan.
	kept map[string]bool
}

// resume prepares an attempt that resumes its run: it closes what earlier attempts left
// running (abandoned, one statement; each closed span is also sent as job:span) and loads
// their spans so that StepSpan finds them.
func (x *execution) resume(ctx context.Context) error {
	closed, err := x.runs().AbandonSpans(ctx, x.run.OrgID, x.run.ID, x.attempt)
	if err != nil {
		return err
	}
	for i := range closed {
		x.Event(ctx, event.JobSpan, &closed[i])
	}
	if len(closed) > 0 {
		x.log.Info("spans of earlier attempts closed as abandoned", "spans", len(closed), "attempt", x.attempt)
	}
	all, err := x.runs().ListSpans(ctx, x.run.OrgID, x.run.ID)
	if err != nil {
		return err
	}
	x.spans.mu.Lock()
	defer x.spans.mu.Unlock()
	x.spans.earlier, x.spans.kept = map[string]span.Span{}, map[string]bool{}
	for _, s := range all {
		step, _ := s.Attributes["step"].(string)
		if k := stepSpanKey(s.Type, step); step != "" && s.Attempt >= 1 && s.Attempt < x.attempt {
			if _, seen := x.spans.earlier[k]; !seen {
				x.spans.earlier[k] = s
			}
		}
	}
	return nil
}

// saveSpan records the span and its job:span event (carrying the whole span). Both are
// buffered and written by the next flush: spans describe the run, while the journal and the
// status decide it, so they need not cost a round trip each.
func (x *execution) saveSpan(ctx context.Context, sp *span.Span) {
	x.buf.mu.Lock()
	defer x.buf.mu.Unlock()
	if err := x.buf.spans.Add(sp); err != nil {
		x.log.Error("saving span", "span_type", sp.Type, "error", err)
		return
	}
	x.queueEvent(event.JobSpan, sp)
}

// Event implements tier.Env. The event is buffered until the next flush, which happens
// before every router and tool call and before the run's status changes, so events are
// journaled in order and no later than the effects they describe.
func (x *execution) Event(ctx context.Context, typ string, data any) {
	x.buf.mu.Lock()
	defer x.buf.mu.Unlock()
	x.queueEvent(typ, data)
}

func (x *execution) queueEvent(typ string, data any) {
	d, err := event.NewDraft(typ, data)
	if err != nil {
		x.log.Warn("emitting event", "type", typ, "error", err)
		return
	}
	x.buf.events = append(x.buf.events, d)
}

// writeBuffer holds spans, events and snapshots not yet written. It is safe for concurrent
// use: the agents of a multi-agent pattern share one execution.
type writeBuffer struct {
	mu     sync.Mutex
	spans  runstore.SpanBatch
	events []event.Draft
	snaps  map[string]snapshot // the tiers' newest snapshots, by key
	// writing is held by whoever takes the buffer to write it, until the write is done, so
	// that writes reach Postgres in the order the buffer was taken: two concurrent flushes
	// would otherwise race, and an older state of a span (running) could overwrite a newer
	// one (ended), or events publish out of seq order.
	writing sync.Mutex
}

// An execution knows which announcements of the autonomous tier a run's events hold.
var _ tier.Announcements = (*execution)(nil)

// announced is what an attempt read of the announcements its run's events held (Announced):
// read once, when a replayed answer is first about to be announced.
type announced struct {
	mu     sync.Mutex
	loaded bool
	keys   map[string]bool
	// unkeyed: an announcement without a key (written before they carried one) is among
	// them; which answers were announced is then unknown.
	unkeyed bool
}

// Announced implements tier.Announcements. The run's announcements are read once per
// attempt, at the first replayed answer that would announce; an announcement written
// since is this attempt's own, of an answer it got fresh or one it decided on here, and
// each is decided once. A run with an announcement that carries no key (written by an
// executor from before announcements carried one) keeps that executor's rule: a replayed
// answer was announced by the attempt that got it. A failed read is tried again at the next
// announcement, and meanwhile reports false: a duplicate announcement is recognisable by
// its key, a lost one is not.
func (x *execution) Announced(ctx context.Context, typ, step string) bool {
	a := &x.announced
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		keys, unkeyed, err := x.runs().Announced(ctx, x.run.ID, tier.AnnouncementTypes)
		if err != nil {
			x.log.Warn("reading the run's announcements; a replayed answer is announced again", "step", step,
				"type", typ, "error", err)
			return false
		}
		a.loaded, a.keys, a.unkeyed = true, keys, unkeyed
	}
	return a.unkeyed || a.keys[runstore.AnnouncementKey(typ, step)]
}

// An execution keeps the snapshots of the autonomous tier.
var _ tier.Snapshots = (*execution)(nil)

// snapshot is a tier's snapshot waiting for the next flush.
type snapshot struct {
	seq   int
	state json.RawMessage
}

// LoadSnapshot implements tier.Snapshots. A run's first attempt has none to find and does
// not look.
func (x *execution) LoadSnapshot(ctx context.Context, key string) (int, json.RawMessage, bool, error) {
	if !x.resumed {
		return 0, nil, false, nil
	}
	seq, state, ok, err := x.runs().LoadSnapshot(ctx, x.run.ID, key)
	if err != nil {
		x.log.Warn("reading snapshot; the run replays its journal", "key", key, "error", err)
		return 0, nil, false, err
	}
	if ok {
		x.log.Info("snapshot loaded", "key", key, "seq", seq)
	}
	return seq, state, ok, nil
}

// SaveSnapshot implements tier.Snapshots: the snapshot is written by the next flush (the
// one before the next router or tool call), in the same round trip as the spans and
// events; only the newest of a key is kept until then.
func (x *execution) SaveSnapshot(_ context.Context, key string, seq int, state json.RawMessage) {
	x.buf.mu.Lock()
	defer x.buf.mu.Unlock()
	x.buf.keepSnapshot(key, snapshot{seq: seq, state: state})
}

// keepSnapshot buffers s as key's snapshot unless a newer one is buffered; x.buf.mu held.
func (b *writeBuffer) keepSnapshot(key string, s snapshot) {
	if b.snaps == nil {
		b.snaps = map[string]snapshot{}
	}
	if old, ok := b.snaps[key]; !ok || old.seq < s.seq {
		b.snaps[key] = s
	}
}

// flush writes the buffered spans and events in one round trip and two statements (one
// implicit transaction), then publishes the events.
func (x *execution) flush(ctx context.Context) {
	x.buf.writing.Lock()
	defer x.buf.writing.Unlock()
	x.buf.mu.Lock()
	spans, drafts, snaps := x.buf.spans, x.buf.events, x.buf.snaps
	x.buf.spans, x.buf.events, x.buf.snaps = runstore.SpanBatch{}, nil, nil
	x.buf.mu.Unlock()
	if spans.Len() == 0 && len(drafts) == 0 && len(snaps) == 0 {
		return
	}
	b := &pgx.Batch{}
	spans.Queue(b)
	envs := runstore.QueueEvents(b, x.run.ID, x.run.OrgID, drafts)
	for key, s := range snaps {
		runstore.QueueSnapshot(b, x.run.ID, key, s.seq, s.state)
	}
	if err := x.runs().SendBatch(ctx, b); err != nil {
		if !transient(err) {
			x.log.Error("writing spans and events", "error", err)
			return
		}
		// Keep them for the next flush (Postgres may be back by then; the attempt's last
		// flush does not depend on its context): a span whose end is lost would stay running.
		// What was buffered since is newer and wins.
		x.log.Warn("writing spans and events; kept for the next write", "error", err)
		x.buf.mu.Lock()
		spans.Append(&x.buf.spans)
		x.buf.spans, x.buf.events = spans, append(drafts, x.buf.events...)
		for key, s := range snaps {
			x.buf.keepSnapshot(key, s)
		}
		x.buf.mu.Unlock()
		return
	}
	if err := x.Events.Publish(ctx, envs...); err != nil {
		x.log.Warn("publishing events", "error", err)
	}
}

// finish ends the run, writing what is buffered in the same round trip.
func (x *execution) finish(ctx context.Context, log *slog.Logger, rn Run, st run.Status, output map[string]any,
	errBody json.RawMessage, warnings ...string) error {
	x.buf.writing.Lock()
	defer x.buf.writing.Unlock()
	x.buf.mu.Lock()
	spans, drafts := x.buf.spans, x.buf.events
	x.buf.spans, x.buf.events = runstore.SpanBatch{}, nil
	x.buf.mu.Unlock()
	return x.Runner.conclude(ctx, log, rn, &spans, drafts, st, output, errBody, warnings...)
}
