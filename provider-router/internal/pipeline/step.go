package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/ledger"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Step makes a call naming its run's step (X-Job-ID + X-Step-Key) one paid provider call
// however often it is asked for (package handoff): a repeated call gets the first one's
// answer without reaching the rest of the chain, and the first runs to its end even when
// its caller goes away. The answer itself is stored by Ledger, on the usage entry's round
// trip; Step closes the claim in every case. Calls without a step key pass straight on.
//
// A call that claims the pair after calls of it were cut off by their router's death
// (handoff.Result.CutOff) records each in the usage ledger with outcome unknown: with its
// own answer's entry when it is answered (Ledger), else itself before it returns.
type Step struct {
	Next    Chatter
	Store   *handoff.Store
	Ledger  *ledger.Writer
	Log     *slog.Logger
	Metrics *Metrics
}

// Chat answers from the pair's stored answer, or claims the pair and calls on.
func (l *Step) Chat(ctx context.Context, call *Call) (*Result, error) {
	if call.StepKey == "" {
		return l.Next.Chat(ctx, call)
	}
	prior, err := l.begin(ctx, call)
	if err != nil {
		return nil, err
	}
	if prior.Answer != nil {
		return &Result{Body: prior.Answer, Replayed: true}, nil
	}
	call.Step, call.CutOff = prior.Call, prior.CutOff
	defer call.Step.Close(context.WithoutCancel(ctx))
	ctx, detached := call.Step.Detach(ctx, call.Deadline)
	defer detached()
	res, err := l.Next.Chat(ctx, call)
	if len(call.CutOff) > 0 { // not answered: Ledger did not record them
		bctx := context.WithoutCancel(ctx)
		entries, also := cutOff(bctx, l.Store, l.Log, call)
		l.Ledger.RecordAll(bctx, entries, also...)
	}
	return res, err
}

// cutOff returns the usage entries of the pair's calls cut off by their router's death
// (call.CutOff, which it empties), with outcome unknown, and what takes them off the
// pair's open calls in the round trip that records them. Provider and model are the
// route of the call that took the step over, when it got that far: the cut-off call
// resolved the same skill the same way unless the organisation's routing changed in
// between. The span id is the cut-off call's own (its token's label), not this call's: an
// attempt of the run that resumed after the cut-off call makes its calls under new spans.
func cutOff(ctx context.Context, store *handoff.Store, log *slog.Logger, call *Call) ([]ledger.Entry, []func(redis.Pipeliner)) {
	pair := handoff.Pair{OrgID: call.OrgID, JobID: call.JobID, Step: call.StepKey}
	entries := make([]ledger.Entry, 0, len(call.CutOff))
	also := make([]func(redis.Pipeliner), 0, len(call.CutOff))
	for _, token := range call.CutOff {
		log.Warn("a call of this step was cut off by its router's death and may have been paid at the provider; recording it with outcome unknown",
			"org_id", call.OrgID, "job_id", call.JobID, "step_key", call.StepKey, "provider", call.Route.ProviderName)
		entries = append(entries, ledger.Entry{
			CallKey: ledger.CallKey(call.JobID, call.StepKey, token), StepKey: call.StepKey, SpanID: handoff.Label(token),
			OrgID: call.OrgID, UserID: call.UserID, RunID: call.JobID, ChainID: call.ChainID, JobType: call.JobType,
			Provider: call.Route.ProviderName, Model: call.Route.Model, Outcome: ledger.OutcomeUnknown,
		})
		also = append(also, store.CloseCutOff(ctx, pair, token))
	}
	call.CutOff = nil
	return entries, also
}

// begin looks the call's (job, step) pair up in the hand-off store. It returns the pair's
// stored answer, or the pair's claim for this call (waiting for a call of the pair in
// flight elsewhere until the call's deadline).
func (l *Step) begin(ctx context.Context, call *Call) (handoff.Result, error) {
	res, err := l.Store.Begin(ctx, handoff.Pair{OrgID: call.OrgID, JobID: call.JobID, Step: call.StepKey}, call.Deadline, call.SpanID)
	switch {
	case err == nil:
		l.Metrics.step(res)
		return res, nil
	case errors.Is(err, handoff.ErrInFlight):
		return res, apierr.New(http.StatusServiceUnavailable, apierr.CodeCallInFlight,
			"Another call of the same job and step is still running; the provider is not called twice.",
			"Retry after Retry-After: the answer of the call in flight is handed to the retry.").
			With("step_key", call.StepKey).SetHeader("Retry-After", "1")
	case errors.Is(err, context.Canceled):
		return res, apierr.New(499, apierr.CodeCancelled, "The caller went away.")
	}
	return res, apierr.New(http.StatusServiceUnavailable, apierr.CodeHandoffUnavailable,
		"The router could not check whether this job's step was already called, so it did not call the provider.",
		"Retry; operators: check Redis.").With("step_key", call.StepKey).Wrap(err)
}
