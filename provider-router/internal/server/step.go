package server

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/switchyard-ai/switchyard/shared/aichat"
)

// HeaderReplayed marks an answer served from the hand-off store: the (job, step) pair was
// answered before and the provider was not called again.
const HeaderReplayed = "X-Router-Replayed"

// maxStepKey bounds X-Step-Key: it is part of Redis keys and of the ledger's call key.
const maxStepKey = 256

// checkIdentity validates the headers that name the call in the ledger and the hand-off:
// run, chain and span ids are UUIDs (the ledger's columns), and a step key needs its run.
// The span id is recorded and nothing else: a malformed one is refused rather than dropped,
// so that a caller sending one finds out.
func checkIdentity(h http.Header) error {
	for _, name := range []string{aichat.HeaderJobID, aichat.HeaderChainID, aichat.HeaderSpanID} {
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
