package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Chain is a chain run as GET /api/v1/chains/{chainId} shows it: its parent run, status,
// progress, cost and steps. A chain starts when a chain skill's job type is dispatched
// (DispatchResult.ChainID).
type Chain = apitypes.Chain

// ChainStep is one step of a chain, or one instance of a for_each step.
type ChainStep = apitypes.ChainStep

// ChainSummary is one chain of ListChains.
type ChainSummary = apitypes.ChainSummary

// ChainList is one page of ListChains.
type ChainList = apitypes.ChainList

// ChainControl is what CancelChain and RerunChain answer.
type ChainControl = apitypes.ChainControl

// The chain statuses, and StepPending, the status of a step not yet dispatched.
const (
	ChainRunning   = apitypes.ChainRunning
	ChainCompleted = apitypes.ChainCompleted
	ChainFailed    = apitypes.ChainFailed
	ChainCancelled = apitypes.ChainCancelled
	ChainTimedOut  = apitypes.ChainTimedOut
	StepPending    = apitypes.StepPending
)

// ChainEnded reports whether a chain status is final: completed, failed, cancelled or
// timed_out.
func ChainEnded(status string) bool {
	switch status {
	case ChainCompleted, ChainFailed, ChainCancelled, ChainTimedOut:
		return true
	}
	return false
}

// Chain returns one of the organisation's chains.
func (c *Client) Chain(ctx context.Context, chainID string) (*Chain, error) {
	var ch Chain
	if err := c.do(ctx, request{method: http.MethodGet, path: chainPath(chainID), retryable: true}, &ch); err != nil {
		return nil, err
	}
	return &ch, nil
}

func chainPath(chainID string) string { return "/api/v1/chains/" + pathEscape(chainID) }

// ChainListOptions filter GET /api/v1/chains; zero fields are not sent.
type ChainListOptions struct {
	// Status is a chain status (ChainRunning, ChainFailed, ...).
	Status  string
	JobType string
	// Limit is the page size (the dispatcher's default is 50).
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
}

func (o ChainListOptions) values() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", o.Status)
	set("job_type", o.JobType)
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	set("cursor", o.Cursor)
	return q
}

// ListChains returns one page of the organisation's chains, newest first.
func (c *Client) ListChains(ctx context.Context, opts ChainListOptions) (ChainList, error) {
	var l ChainList
	err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/chains", query: opts.values(), retryable: true}, &l)
	return l, err
}

// ListAllChains iterates over every chain matching opts, fetching pages as it goes. It
// stops at the first error, which it yields.
func (c *Client) ListAllChains(ctx context.Context, opts ChainListOptions) iter.Seq2[ChainSummary, error] {
	return pages(opts.Cursor, func(cursor string) ([]ChainSummary, string, error) {
		opts.Cursor = cursor
		page, err := c.ListChains(ctx, opts)
		return page.Items, page.NextCursor, err
	})
}

// CancelChain cancels a running chain: its queued and held steps are cancelled, its running
// ones asked to stop, its pending ones never start. A chain that has ended answers
// ErrChainAlreadyFinished.
func (c *Client) CancelChain(ctx context.Context, chainID string) (ChainControl, error) {
	var a ChainControl
	err := c.do(ctx, request{method: http.MethodPost, path: chainPath(chainID) + "/cancel", retryable: true}, &a)
	return a, err
}

// RerunChain starts a new chain from an ended one: the steps that completed keep their
// outputs (ChainControl.Reused), the failed, cancelled and skipped ones run again. The answer
// is the new chain; a chain still running answers ErrChainNotFinished. It is never retried:
// a retry could start two chains.
func (c *Client) RerunChain(ctx context.Context, chainID string) (ChainControl, error) {
	var a ChainControl
	err := c.do(ctx, request{method: http.MethodPost, path: chainPath(chainID) + "/rerun"}, &a)
	return a, err
}

// ChainEventData is the data of the chain:* events (shared/event), journaled on the chain's
// parent run; which members are set depends on the event type.
type ChainEventData struct {
	ChainID string `json:"chainId"`
	// chain:step_dispatched and chain:step_ended.
	StepID    string          `json:"stepId,omitempty"`
	Instance  *int            `json:"instance,omitempty"`
	JobID     string          `json:"jobId,omitempty"`
	JobType   string          `json:"jobType,omitempty"`
	Queue     string          `json:"queue,omitempty"`
	Status    string          `json:"status,omitempty"`
	DependsOn []string        `json:"dependsOn,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
	// Reason says why a step ended without completing (skipped, cancelled).
	Reason string `json:"reason,omitempty"`
	// CostUSD is the step's cost (chain:step_ended) or the chain's (chain:progress).
	CostUSD float64 `json:"costUsd,omitempty"`
	// chain:fork: the step whose end (or fan-out) started several.
	Trigger string   `json:"trigger,omitempty"`
	Forked  []string `json:"forked,omitempty"`
	// chain:join: the step unblocked by the last of its parents.
	JoinStepID            string   `json:"joinStepId,omitempty"`
	CompletedPredecessors []string `json:"completedPredecessors,omitempty"`
	// chain:progress.
	Progress  float64 `json:"progress,omitempty"`
	Completed int     `json:"completed,omitempty"`
	Total     int     `json:"total,omitempty"`
}

// ChainData decodes the data of a chain:* event; false for other events.
func (e Event) ChainData() (ChainEventData, bool) {
	var d ChainEventData
	if !strings.HasPrefix(e.Type, "chain:") || json.Unmarshal(e.Data, &d) != nil {
		return ChainEventData{}, false
	}
	return d, true
}

// WatchChain follows the events of every run of a chain — the parent run's chain:* and
// job:* events and each step run's job:* events — until the parent run's terminal event,
// which it yields last. after gives, per run id, the seq of the last event already seen
// (nil: from the start of each journal); events arrive in seq order per run, in no order
// across runs, never twice. Like Watch it streams over the WebSocket (subscribing to
// chain_id with after_seqs) and, when the socket cannot be opened or drops, polls each
// unfinished run's GET /api/v1/dispatch/{id}/events from the last event seen. An unknown
// chain yields ErrChainNotFound. An error is yielded once and ends the sequence; breaking
// out of the loop or cancelling ctx stops watching.
func (c *Client) WatchChain(ctx context.Context, chainID string, after map[string]int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ch, err := c.Chain(ctx, chainID)
		if err != nil {
			yield(Event{}, err)
			return
		}
		w := &chainWatch{c: c, chainID: chainID, parent: ch.JobID, last: map[string]int64{},
			ended: map[string]bool{}, yield: yield}
		for run, seq := range after {
			w.last[run] = seq
		}
		// As in Watch: an ended chain's events are all in the journals, and the stream
		// would wait forever when its end is at or before after.
		if ChainEnded(ch.Status) || !w.socket(ctx) {
			w.poll(ctx)
		}
	}
}

// chainWatch is the state of one WatchChain: the last seq delivered per run, the runs
// whose terminal event was delivered, and the caller's yield.
type chainWatch struct {
	c       *Client
	chainID string
	parent  string
	last    map[string]int64
	ended   map[string]bool
	yield   func(Event, error) bool
}

// deliver yields e unless already seen; it reports whether watching is over.
func (w *chainWatch) deliver(e Event) (done bool) {
	if e.Seq <= w.last[e.JobID] {
		return false
	}
	w.last[e.JobID] = e.Seq
	if e.Terminal() {
		w.ended[e.JobID] = true
	}
	return !w.yield(e, nil) || e.JobID == w.parent && e.Terminal()
}

func (w *chainWatch) fail(ctx context.Context, err error) { yieldErr(ctx, w.yield, err) }

// socket follows the stream; it reports whether watching is over (false: fall back to
// polling). The subscription is a message rather than the query, as only a message can
// carry after_seqs; one over the stream's 8 KiB message limit (a resume of a chain with
// hundreds of runs) makes the stream close, and watching goes on by polling.
func (w *chainWatch) socket(ctx context.Context) (done bool) {
	msg := map[string]any{"type": "subscribe", "chain_id": w.chainID}
	if len(w.last) > 0 {
		msg["after_seqs"] = w.last
	}
	return w.c.stream(ctx, nil, msg, w.deliver, w.fail)
}

// poll reads the journals of the chain's runs — the parent's and each step run's not yet
// ended, found anew each round as steps are dispatched — until the parent's terminal
// event. When a round brings nothing and the parent has ended (its terminal event was at or
// before after), it stops too.
func (w *chainWatch) poll(ctx context.Context) {
	t := time.NewTicker(w.c.pollEvery)
	defer t.Stop()
	for {
		ch, err := w.c.Chain(ctx, w.chainID)
		if err != nil {
			w.fail(ctx, err)
			return
		}
		done, got := w.readSteps(ctx, ch)
		if done {
			return
		}
		done, n := w.readParent(ctx)
		if done {
			return
		}
		got += n
		if got == 0 {
			r, err := w.c.Get(ctx, w.parent)
			if err != nil {
				w.fail(ctx, err)
				return
			}
			if r.Status.Terminal() {
				// Catch a terminal event journaled between the two reads.
				w.readParent(ctx)
				return
			}
		}
		if !tick(ctx, t, w.fail) {
			return
		}
	}
}

// readSteps delivers the new events of the chain's step runs not yet ended.
func (w *chainWatch) readSteps(ctx context.Context, ch *Chain) (done bool, n int) {
	var seen []string
	for _, s := range ch.Steps {
		if s.JobID == "" || w.ended[s.JobID] || slices.Contains(seen, s.JobID) {
			continue
		}
		seen = append(seen, s.JobID)
		done, got := w.read(ctx, s.JobID)
		if done {
			return true, n + got
		}
		n += got
	}
	return false, n
}

// readParent delivers the parent run's new events. Before its terminal event — the end of
// the watch — the step runs are read once more: the chain's end may have ended steps (a
// cancellation) whose events were journaled after the steps were last read.
func (w *chainWatch) readParent(ctx context.Context) (done bool, n int) {
	evs, err := w.c.Events(ctx, w.parent, w.last[w.parent])
	if err != nil {
		w.fail(ctx, err)
		return true, 0
	}
	for _, e := range evs {
		if e.Terminal() && e.Seq > w.last[e.JobID] {
			ch, err := w.c.Chain(ctx, w.chainID)
			if err != nil {
				w.fail(ctx, err)
				return true, len(evs)
			}
			if done, _ := w.readSteps(ctx, ch); done {
				return true, len(evs)
			}
		}
		if w.deliver(e) {
			return true, len(evs)
		}
	}
	return false, len(evs)
}

// read delivers one run's events after the last seen; it reports whether watching is over
// (an error ends it, yielded) and how many events came.
func (w *chainWatch) read(ctx context.Context, run string) (done bool, n int) {
	evs, err := w.c.Events(ctx, run, w.last[run])
	if err != nil {
		w.fail(ctx, err)
		return true, 0
	}
	for _, e := range evs {
		if w.deliver(e) {
			return true, len(evs)
		}
	}
	return false, len(evs)
}
