// Package ledger keeps one usage row per paid provider call, and loses none.
//
// Record appends the call's entry to a Redis stream synchronously, before the caller gets
// its answer (Redis persists it with its append-only file); a mover in every router
// replica reads the stream through one consumer group and writes the entries to Postgres
// in batches, idempotently (a unique call key; the organisation's monthly token counter
// grows only by the rows actually inserted, in the same statement), and acknowledges them
// only after the commit. Entries a dead replica had read but not written are claimed by
// the others (XAUTOCLAIM). When Redis refuses an entry it is written to Postgres at once;
// when both refuse it, it is held in memory and retried until one takes it.
package ledger

import (
	"crypto/rand"
	"encoding/json"
	"time"
)

// Outcomes of a call (usage_ledger.outcome).
const (
	// OutcomeAnswered: the router received the provider's answer; tokens and cost are its.
	OutcomeAnswered = "answered"
	// OutcomeUnknown: the router that made the call died while it was at the provider; it
	// may have been answered and billed there, but nobody received the answer, so tokens
	// and cost are 0. Written by the call that took the step over (package handoff).
	OutcomeUnknown = "unknown"
)

// Entry is one paid provider call.
type Entry struct {
	// CallKey identifies the call: a second write of the same entry is a no-op. Record
	// fills a random one when empty; see CallKey.
	CallKey string `json:"call_key"`
	// StepKey is the call's position in its run (X-Step-Key), empty when not sent.
	StepKey string `json:"step_key,omitempty"`
	// SpanID is the caller's llm_call span the call was made under (X-Span-ID), empty when
	// not sent.
	SpanID                                 string `json:"span_id,omitempty"`
	OrgID, UserID, RunID, ChainID, JobType string
	Provider, Model                        string
	TokensIn, TokensOut, TokensCached      int64
	CostUSD                                float64
	Latency, QueueWait                     time.Duration
	At                                     time.Time
	// Outcome is OutcomeAnswered (also when empty) or OutcomeUnknown.
	Outcome string `json:"outcome,omitempty"`
}

// CallKey is the unique key of a call that run runID made at step stepKey and that token
// (the claim of that one upstream call) paid for. A call without a run or a step gets
// token alone: it cannot be repeated under the same key.
func CallKey(runID, stepKey, token string) string {
	if runID == "" || stepKey == "" {
		return token
	}
	return runID + "/" + stepKey + "/" + token
}

// NewToken returns a random token for a call key.
func NewToken() string { return rand.Text() }

func (e Entry) encode() ([]byte, error) { return json.Marshal(e) }

func decode(raw string) (Entry, error) {
	var e Entry
	err := json.Unmarshal([]byte(raw), &e)
	return e, err
}
