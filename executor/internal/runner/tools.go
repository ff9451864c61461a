package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchyard-ai/switchyard/executor/internal/metrics"
	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/executor/internal/tier"
	"github.com/switchyard-ai/switchyard/executor/internal/toolcall"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// toolEntry is the journal form of a tool result.
type toolEntry struct {
	SpanID         string          `json:"span_id"`
	Tool           string          `json:"tool"`
	CallID         string          `json:"call_id"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Result         toolcall.Result `json:"result"`
	// FromLedger says the result came from the tool-call ledger, not from a call.
	FromLedger bool `json:"from_ledger,omitempty"`
	// Resent says the call's outcome was unknown (its first attempt died while it was in
	// flight) and it was sent again with the same key to a tool that honours the key.
	Resent bool `json:"resent,omitempty"`
}

// Tools implements tier.Env.
func (x *execution) Tools(ctx context.Context) ([]tool.Tool, error) {
	return tool.Offered(ctx, x.DB, x.run.OrgID, x.skill.Tools)
}

// CheckCancel implements tier.Env: cancellation is state in Postgres (the dispatcher's
// cancel endpoint sets it, then wakes the handler through asynq); the loop reads it
// between steps.
func (x *execution) CheckCancel(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	requested, err := x.runs().CancelRequested(context.WithoutCancel(ctx), x.run.ID)
	if err != nil {
		return err
	}
	if requested {
		return tier.ErrCancelled
	}
	return nil
}

// CallPrice implements tier.Env: the router, which alone routes and prices calls, quotes
// the model the run's calls go to.
func (x *execution) CallPrice(ctx context.Context) (tier.Price, bool, error) {
	rn := x.run
	q, err := x.Router.Price(ctx, routerclient.Job{OrgID: rn.OrgID, JobID: rn.ID, TraceID: rn.TraceID,
		JobType: rn.JobType, RoutingHint: x.skill.RoutingHint, ModelOverride: x.skill.ModelOverride})
	if err != nil {
		return tier.Price{}, false, err
	}
	return tier.Price{InputPerMTok: q.InputPerMTok, OutputPerMTok: q.OutputPerMTok}, q.Known, nil
}

// CallTool implements tier.Env: journal before moving on; side-effecting calls go through
// the tool-call ledger so that one idempotency key reaches the tool at most once — or, for
// a tool that honours the key, answers the same whatever the number of times it is sent.
func (x *execution) CallTool(ctx context.Context, step, parentSpanID string, t tool.Tool, call openai.ToolCall) (string, error) {
	var prior toolEntry
	if ok, err := x.journaled(ctx, step, &prior); err != nil {
		return "", err
	} else if ok {
		x.log.Info("tool result replayed from journal", "step", step, "tool", t.Name)
		x.Metrics.ToolCall(t.Name, metrics.Replayed, 0)
		return prior.Result.Content, nil
	}

	args := call.Function.Arguments
	sp := x.StartSpan(ctx, parentSpanID, span.ToolCall, "tool "+t.Name, map[string]any{"step": step, "tool": t.Name,
		"call_id": call.ID, "side_effecting": t.SideEffecting})
	x.Event(ctx, event.JobToolCall, map[string]any{"step": step, "span_id": sp.ID, "tool": t.Name,
		"call_id": call.ID, "arguments": argsJSON(args), "side_effecting": t.SideEffecting})

	entry := toolEntry{SpanID: sp.ID, Tool: t.Name, CallID: call.ID}
	var allow []string
	if t.Kind == tool.KindBuiltin {
		var err error
		if allow, err = tool.HTTPAllowlist(ctx, x.DB, x.run.OrgID); err != nil {
			x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
			return "", err
		}
	}
	x.flush(ctx)
	started := time.Now()
	var err error
	if t.SideEffecting {
		entry.IdempotencyKey = toolcall.IdempotencyKey(x.run.ID, step, t.Name, args)
		entry.Result, entry.FromLedger, entry.Resent, err = x.ledgered(ctx, step, t, args, allow, entry.IdempotencyKey)
	} else {
		entry.Result, err = x.Tooling.Call(ctx, t, args, allow, "")
	}
	if err != nil {
		x.EndSpan(context.WithoutCancel(ctx), sp.Set("error", err.Error()), span.Error)
		return "", err
	}
	took := time.Since(started)
	if entry.Result.Detail != "" {
		// What the LLM reads is a safe summary; the operator gets the details.
		x.log.Warn("tool call failed", "step", step, "tool", t.Name, "error", entry.Result.Detail)
	}
	if entry.Result.Content == "" {
		entry.Result.Content = "(the tool answered with an empty body)"
	}
	if err := x.persist(ctx, "tool_result", step, func(ctx context.Context) error {
		_, err := x.journal(ctx, step, "tool_result", entry)
		return err
	}); err != nil {
		x.EndSpan(context.WithoutCancel(ctx), sp, span.Error)
		return "", err
	}
	sp.Set("latency_ms", took.Milliseconds()).Set("ok", entry.Result.OK).
		Set("truncated", entry.Result.Truncated).Set("bytes", entry.Result.Bytes)
	if entry.Result.Status != 0 {
		sp.Set("http_status", entry.Result.Status)
	}
	outcome := "ok"
	switch {
	case entry.FromLedger:
		sp.Set("from_ledger", true)
		outcome, took = metrics.ToolFromLedger, 0
	case entry.Resent:
		sp.Set("resent", true)
		outcome = metrics.ToolResent
	case !entry.Result.OK:
		outcome = "error"
	}
	x.Metrics.ToolCall(t.Name, outcome, took)
	st := span.OK
	if !entry.Result.OK {
		st = span.Error
	}
	x.EndSpan(ctx, sp, st)
	x.Event(ctx, event.JobToolResult, map[string]any{"step": step, "span_id": sp.ID, "tool": t.Name,
		"call_id": call.ID, "ok": entry.Result.OK, "status": entry.Result.Status, "truncated": entry.Result.Truncated,
		"bytes": entry.Result.Bytes, "content": entry.Result.Content})
	return entry.Result.Content, nil
}

// ledgered performs a side-effecting call at most once per idempotency key: the ledger row
// is inserted before the call; a key already in the ledger is answered from it. When the
// first call's outcome is unknown — the worker died while it was in flight, so the row
// still says started — a tool that honours Idempotency-Key is sent the call again with the
// same key (resent), and its answer is the first call's; any other tool is never sent it
// again, and the LLM is told the outcome is unknown.
func (x *execution) ledgered(ctx context.Context, step string, t tool.Tool, args string, allow []string, key string) (res toolcall.Result, fromLedger, resent bool, err error) {
	inserted, err := ledgerStart(ctx, x.DB, key, x.run.ID, x.run.OrgID, t.Name, step, argsJSON(args))
	if err != nil {
		return toolcall.Result{}, false, false, err
	}
	if !inserted {
		status, resp, err := ledgerGet(ctx, x.DB, key)
		if err != nil {
			return toolcall.Result{}, false, false, err
		}
		switch {
		case status == "started" && t.HonoursIdempotencyKey:
			x.log.Info("side-effecting call of unknown outcome sent again with its key; the tool honours it",
				"step", step, "tool", t.Name)
			resent = true
		case status == "started":
			x.log.Info("side-effecting call of unknown outcome not repeated", "step", step, "tool", t.Name)
			return toolcall.Failed("the outcome of this %s call is unknown: the worker stopped while it was in flight, "+
				"and a side-effecting call is never sent twice (idempotency key %s)", t.Name, key), true, false, nil
		default:
			x.log.Info("side-effecting call found in the ledger; not repeated", "step", step, "tool", t.Name, "ledger_status", status)
			if err := json.Unmarshal(resp, &res); err != nil {
				return toolcall.Result{}, false, false, fmt.Errorf("decoding ledger entry %s: %w", key, err)
			}
			return res, true, false, nil
		}
	}
	res, err = x.Tooling.Call(ctx, t, args, allow, key)
	if err != nil {
		// The run ended while the call was in flight: the row stays "started", so the key
		// is never sent again (or, to a tool that honours it, sent again by the next attempt).
		return res, false, resent, err
	}
	status := "succeeded"
	if !res.OK {
		status = "failed"
	}
	if err := x.persist(ctx, "tool_result", step, func(ctx context.Context) error {
		return ledgerFinish(ctx, x.DB, key, status, res)
	}); err != nil {
		return res, false, resent, err
	}
	return res, false, resent, nil
}

// approvalEntry is the journal form of a pause for approval.
type approvalEntry struct {
	Held       []tier.Held `json:"held"`
	ReviewSpan string      `json:"review_span_id"`
	// Attempt is the attempt that paused, which made the review span.
	Attempt int `json:"attempt,omitempty"`
}

type decisionEntry struct {
	Decision tier.Decision `json:"decision"`
	Reviewer string        `json:"reviewer"`
	Reason   string        `json:"reason"`
}

// Approval implements tier.Env. The first time a step asks, the pause is journaled (its
// time is the journal row's) and the answer is Pending; on resume the newest review of the
// run written after the pause decides, and the decision is journaled.
func (x *execution) Approval(ctx context.Context, step string, held []tier.Held) (tier.Review, error) {
	var d decisionEntry
	if ok, err := x.journaled(ctx, step+"/decision", &d); err != nil || ok {
		return tier.Review{Decision: d.Decision, Reason: d.Reason}, err
	}
	var pause approvalEntry
	pausedAt, ok, err := x.runs().Journaled(ctx, x.run.ID, step, &pause)
	if err != nil {
		return tier.Review{}, err
	}
	if !ok {
		sp := x.StartSpan(ctx, x.run.ID, span.GovernanceReview, "approval of tool calls",
			map[string]any{"step": step, "tools": heldTools(held)})
		if _, err := x.journal(ctx, step, "decision",
			approvalEntry{Held: held, ReviewSpan: sp.ID, Attempt: x.attempt}); err != nil {
			return tier.Review{}, err
		}
		return tier.Review{Decision: tier.Pending}, nil
	}
	rv, found, err := latestReview(ctx, x.DB, x.run.ID, pausedAt)
	if err != nil || !found {
		return tier.Review{Decision: tier.Pending}, err
	}
	d = decisionEntry{Decision: tier.Decision(rv.Decision), Reviewer: rv.Reviewer, Reason: rv.Reason}
	if _, err := x.journal(ctx, step+"/decision", "decision", d); err != nil {
		return tier.Review{}, err
	}
	if pause.ReviewSpan != "" {
		sp := span.Start(x.run.ID, x.run.OrgID, x.run.TraceID, x.run.ID, span.GovernanceReview, "approval of tool calls")
		sp.ID, sp.StartedAt, sp.Attempt, sp.ChainID = pause.ReviewSpan, pausedAt, pause.Attempt, x.run.ChainID
		st := span.OK
		if d.Decision == tier.Rejected {
			st = span.Error
		}
		x.EndSpan(ctx, sp.Set("step", step).Set("tools", heldTools(pause.Held)).Set("decision", d.Decision).
			Set("reviewer", d.Reviewer), st)
	}
	x.log.Info("tool calls reviewed", "step", step, "decision", d.Decision, "reviewer", d.Reviewer)
	return tier.Review{Decision: d.Decision, Reason: d.Reason}, nil
}

func heldTools(held []tier.Held) []string {
	tools := make([]string, 0, len(held))
	for _, h := range held {
		tools = append(tools, h.Tool)
	}
	return tools
}

func argsJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
