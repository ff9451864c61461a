package pipeline

import (
	"context"
	"errors"
	"net/http"

	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Step makes a call naming its run's step (X-Job-ID + X-Step-Key) one paid provider call
// however often it is asked for (package handoff): a repeated call gets the first one's
// answer without reaching the rest of the chain, and the first runs to its end even when
// its caller goes away. The answer itself is stored by Ledger, on the usage entry's round
// trip; Step closes the claim in every case. Calls without a step key pass straight on.
type Step struct {
	Next    Chatter
	Store   *handoff.Store
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
	call.Step = prior.Call
	defer call.Step.Close(context.WithoutCancel(ctx))
	ctx, detached := call.Step.Detach(ctx, call.Deadline)
	defer detached()
	return l.Next.Chat(ctx, call)
}

// begin looks the call's (job, step) pair up in the hand-off store. It returns the pair's
// stored answer, or the pair's claim for this call (waiting for a call of the pair in
// flight elsewhere until the call's deadline).
func (l *Step) begin(ctx context.Context, call *Call) (handoff.Result, error) {
	res, err := l.Store.Begin(ctx, handoff.Pair{OrgID: call.OrgID, JobID: call.JobID, Step: call.StepKey}, call.Deadline)
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
