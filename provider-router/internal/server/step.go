package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/shared/aichat"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// HeaderReplayed marks an answer served from the hand-off store: the (job, step) pair was
// answered before and the provider was not called again.
const HeaderReplayed = "X-Router-Replayed"

// maxStepKey bounds X-Step-Key: it is part of Redis keys and of the ledger's call key.
const maxStepKey = 256

// beginStep looks the call's (job, step) pair up in the hand-off store. It returns the
// pair's stored answer, or the pair's claim for this call (waiting for a call of the pair
// in flight elsewhere until deadline), or neither for a call without a step key.
func (s *Server) beginStep(ctx context.Context, h http.Header, deadline time.Time) (handoff.Result, error) {
	step := h.Get(aichat.HeaderStepKey)
	if step == "" || s.Handoff == nil {
		return handoff.Result{}, nil
	}
	res, err := s.Handoff.Begin(ctx, handoff.Pair{OrgID: h.Get(aichat.HeaderOrgID), JobID: h.Get(aichat.HeaderJobID), Step: step}, deadline)
	switch {
	case err == nil:
		s.Metrics.step(res)
		return res, nil
	case errors.Is(err, handoff.ErrInFlight):
		return res, apierr.New(http.StatusServiceUnavailable, "CALL_IN_FLIGHT",
			"Another call of the same job and step is still running; the provider is not called twice.",
			"Retry after Retry-After: the answer of the call in flight is handed to the retry.").
			With("step_key", step).SetHeader("Retry-After", "1")
	case errors.Is(err, context.Canceled):
		return res, apierr.New(499, "CANCELLED", "The caller went away.")
	}
	return res, apierr.New(http.StatusServiceUnavailable, "HANDOFF_UNAVAILABLE",
		"The router could not check whether this job's step was already called, so it did not call the provider.",
		"Retry; operators: check Redis.").With("step_key", step).Wrap(err)
}

// checkIdentity validates the headers that name the call in the ledger and the hand-off:
// run and chain ids are UUIDs (the ledger's columns), and a step key needs its run.
func checkIdentity(h http.Header) error {
	for _, name := range []string{aichat.HeaderJobID, aichat.HeaderChainID} {
		if v := h.Get(name); v != "" {
			if _, err := uuid.Parse(v); err != nil || len(v) != 36 {
				return invalid(name+" is not a UUID.", "Send the id as the dispatcher issued it.", name)
			}
		}
	}
	step := h.Get(aichat.HeaderStepKey)
	switch {
	case step == "":
		return nil
	case h.Get(aichat.HeaderJobID) == "":
		return invalid("A step key needs the run's X-Job-ID.", "Send X-Job-ID with X-Step-Key.", aichat.HeaderJobID)
	case len(step) > maxStepKey:
		return invalid("X-Step-Key is longer than "+strconv.Itoa(maxStepKey)+" bytes.",
			"Send the journal's step key, e.g. iter/2/llm.", aichat.HeaderStepKey)
	}
	return nil
}
