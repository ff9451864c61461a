// Package handoff makes one (job, step key) pair one paid provider call however often it
// is asked for: by a retried or resumed attempt of the run, by a second caller racing the
// first, on any router replica.
//
// A call for a pair first claims it in Redis: a key holding the call's token, with a TTL
// the call renews while it runs. With the provider's answer, the call stores the answer
// under the pair for AnswerTTL — in the same round trip as its usage-ledger entry — and
// drops its claim. A later call for the pair gets the stored answer and never reaches the
// provider. A call that finds the pair claimed waits, polling with backoff, for the
// answer; when the claim is released (the first call failed) or expires (its replica
// died), the waiting call claims the pair and calls the provider itself.
//
// A call whose replica died mid-call may have been answered, and paid, at the provider:
// the answer reached no one, so nothing can hand it over and the call that takes the pair
// over calls the provider again. Each claim therefore keeps the call's token among the
// pair's open calls until it stores an answer or releases the claim (it failed); the call
// that next claims the pair is given the tokens still open — the cut-off calls — to
// record in the usage ledger as calls of unknown outcome (Result.CutOff, CloseCutOff).
// A call may label its token (the caller's span id): the label travels with the token, so
// the call that records a cut-off call knows what the cut-off call was labelled (Label).
package handoff

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// AnswerTTL is how long a pair's answer is kept for repeated calls; default 24 h.
	AnswerTTL time.Duration
	// ClaimTTL is how long a claim outlives the replica holding it: the call renews it every
	// third of it, so a claim of a dead replica is free again within ClaimTTL; default 30 s.
	ClaimTTL time.Duration
	// MinPoll and MaxPoll bound the waiting call's polls: MinPoll doubling up to MaxPoll;
	// defaults 10 ms and 250 ms.
	MinPoll, MaxPoll time.Duration
	// RunStopped, when set, tells Detach whether a run was cancelled or has ended (see
	// RunStopped): a call whose caller went away is then cancelled instead of finished.
	RunStopped func(ctx context.Context, runID string) (bool, error)
}

// Store is the pairs' claims and answers in Redis.
type Store struct {
	rdb  redis.UniversalClient
	log  *slog.Logger
	opts Options
}

// New returns a store on rdb; call Start before use.
func New(rdb redis.UniversalClient, log *slog.Logger, opts Options) *Store {
	opts.AnswerTTL = cmp.Or(opts.AnswerTTL, 24*time.Hour)
	opts.ClaimTTL = cmp.Or(opts.ClaimTTL, 30*time.Second)
	opts.MinPoll = cmp.Or(opts.MinPoll, 10*time.Millisecond)
	opts.MaxPoll = cmp.Or(opts.MaxPoll, 250*time.Millisecond)
	return &Store{rdb: rdb, log: log, opts: opts}
}

// Start loads the scripts, so the finish that rides a pipeline (EVALSHA, which cannot
// fall back to EVAL there) finds its script.
func (s *Store) Start(ctx context.Context) error {
	for _, sc := range []*redis.Script{claimScript, finishScript, releaseScript, renewScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("loading the hand-off scripts: %w", err)
		}
	}
	return nil
}

// Pair names one paid call: the run (with its organisation) and the call's step key.
type Pair struct {
	OrgID, JobID, Step string
}

// Result is what Begin found.
type Result struct {
	// Answer is the pair's stored answer, to be returned as it is; nil when Call is set.
	Answer []byte
	// Call holds the pair's claim: call the provider, queue Finish on the ledger's round
	// trip, and Close in every case.
	Call *Call
	// Waited says another call held the pair when this one arrived.
	Waited bool
	// CutOff holds, with Call, the tokens of earlier calls of the pair that claimed it and
	// never stored an answer nor released it: their replica died during the call. Each may
	// have been paid at the provider; record them (CloseCutOff).
	CutOff []string
}

// ErrInFlight is Begin's answer when another call still holds the pair at the deadline.
var ErrInFlight = errors.New("the step's call is still in flight")

// Begin returns the pair's answer, or its claim, waiting until until for a call in flight.
// A label (no spaces; the caller's span id) becomes part of the claim's token, so that it
// is handed out with the token if the call is cut off (Label).
func (s *Store) Begin(ctx context.Context, p Pair, until time.Time, label string) (Result, error) {
	answerKey, claimKey, openKey := keys(p)
	token := rand.Text()
	if label != "" {
		token += labelSep + label
	}
	var res Result
	pause := s.opts.MinPoll
	for {
		v, err := claimScript.Run(ctx, s.rdb, []string{answerKey, claimKey, openKey}, token,
			s.opts.ClaimTTL.Milliseconds(), s.opts.AnswerTTL.Milliseconds()).Slice()
		if err != nil {
			return res, fmt.Errorf("claiming step %q of job %s: %w", p.Step, p.JobID, err)
		}
		switch v[0] {
		case int64(claimAnswered):
			body, _ := v[1].(string)
			res.Answer = []byte(body)
			return res, nil
		case int64(claimTaken):
			for _, t := range v[1:] {
				if t, ok := t.(string); ok {
					res.CutOff = append(res.CutOff, t)
				}
			}
			res.Call = s.newCall(p, token, answerKey, claimKey, openKey)
			return res, nil
		}
		if !res.Waited {
			res.Waited = true
			s.log.Info("waiting for the step's call in flight", "org_id", p.OrgID, "job_id", p.JobID, "step_key", p.Step)
		}
		left := time.Until(until)
		if left <= 0 {
			return res, ErrInFlight
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-t.C:
		}
		pause = min(pause*2, s.opts.MaxPoll)
	}
}

// labelSep separates a token's random part (base32: A–Z, 2–7) from its label.
const labelSep = "."

// Label returns the label a token was claimed with (Begin), or "" when it has none (also
// a token of a router from before labels).
func Label(token string) string {
	_, label, _ := strings.Cut(token, labelSep)
	return label
}

// Call is a claim on a pair, held while its provider call runs. A nil *Call (a call
// without a pair) does nothing.
type Call struct {
	s                   *Store
	pair                Pair
	token               string
	answerKey, claimKey string
	openKey             string
	renewal             *time.Timer
	closed              atomic.Bool
	body                []byte
	finish              *redis.Cmd
}

func (s *Store) newCall(p Pair, token, answerKey, claimKey, openKey string) *Call {
	c := &Call{s: s, pair: p, token: token, answerKey: answerKey, claimKey: claimKey, openKey: openKey}
	c.renewal = time.AfterFunc(s.opts.ClaimTTL/3, c.renew)
	return c
}

// Token is the claim's token: one per upstream call of the pair, random, then its label
// if it has one.
func (c *Call) Token() string {
	if c == nil {
		return ""
	}
	return c.token
}

// Detach returns the context the pair's call runs under. It is not cancelled when the
// caller goes away — an executor that died is resumed, and its retry gets the answer —
// unless the run was cancelled or has ended meanwhile (Options.RunStopped, asked when the
// caller goes): then no one will take the answer and the provider call is cancelled. It
// ends at deadline in any case. A nil *Call returns ctx as it is.
func (c *Call) Detach(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if c == nil {
		return ctx, func() {}
	}
	detached, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	stopped := c.s.opts.RunStopped
	if stopped == nil {
		return detached, cancel
	}
	stop := context.AfterFunc(ctx, func() {
		if detached.Err() != nil {
			return
		}
		qctx, qcancel := context.WithTimeout(detached, 2*time.Second)
		defer qcancel()
		ended, err := stopped(qctx, c.pair.JobID)
		switch {
		case err != nil:
			c.s.log.Warn("the step's caller went away and its run could not be read; the call goes on",
				"job_id", c.pair.JobID, "step_key", c.pair.Step, "error", err)
		case ended:
			c.s.log.Info("the step's caller went away and its run was stopped; cancelling the call",
				"job_id", c.pair.JobID, "step_key", c.pair.Step)
			cancel()
		default:
			c.s.log.Info("the step's caller went away; the call goes on and its answer waits for the retry",
				"job_id", c.pair.JobID, "step_key", c.pair.Step)
		}
	})
	return detached, func() {
		stop()
		cancel()
	}
}

// renew extends the claim while the call runs. A claim found lost (the replica stalled
// past its TTL) is only reported: the provider call is already under way.
func (c *Call) renew() {
	if c.closed.Load() {
		return
	}
	n, err := renewScript.Run(context.Background(), c.s.rdb, []string{c.claimKey}, c.token, c.s.opts.ClaimTTL.Milliseconds()).Int()
	switch {
	case c.closed.Load(): // finished or released meanwhile
		return
	case err != nil:
		c.s.log.Warn("renewing the step's claim", "job_id", c.pair.JobID, "step_key", c.pair.Step, "error", err)
	case n == 0:
		c.s.log.Warn("the step's claim expired while its call ran; another call may repeat it",
			"job_id", c.pair.JobID, "step_key", c.pair.Step)
		return
	}
	if !c.closed.Load() {
		c.renewal.Reset(c.s.opts.ClaimTTL / 3)
	}
}

// Finish returns what queues, on the ledger entry's pipeline, storing body as the pair's
// answer and dropping the claim. Close checks that it worked.
func (c *Call) Finish(ctx context.Context, body []byte) func(redis.Pipeliner) {
	if c == nil {
		return nil
	}
	return func(pipe redis.Pipeliner) {
		c.body = body
		c.finish = finishScript.EvalSha(ctx, pipe, []string{c.answerKey, c.claimKey, c.openKey}, body,
			c.s.opts.AnswerTTL.Milliseconds(), c.token)
	}
}

// Close ends the claim. After a Finish that failed it stores the answer once more; without
// a stored answer (the call failed) it releases the claim, so a waiting call of the pair
// calls the provider itself at once instead of after the claim's TTL.
func (c *Call) Close(ctx context.Context) {
	if c == nil || c.closed.Swap(true) {
		return
	}
	c.renewal.Stop()
	if c.finish != nil {
		err := c.finish.Err()
		if err != nil { // NOSCRIPT after a Redis restart, or a lost round trip
			err = finishScript.Run(ctx, c.s.rdb, []string{c.answerKey, c.claimKey, c.openKey}, c.body,
				c.s.opts.AnswerTTL.Milliseconds(), c.token).Err()
		}
		if err == nil {
			return
		}
		c.s.log.Warn("storing the step's answer for repeated calls; a repeated call will reach the provider again",
			"job_id", c.pair.JobID, "step_key", c.pair.Step, "error", err)
	}
	if err := releaseScript.Run(ctx, c.s.rdb, []string{c.claimKey, c.openKey}, c.token).Err(); err != nil {
		c.s.log.Warn("releasing the step's claim; a waiting call takes it over when it expires",
			"job_id", c.pair.JobID, "step_key", c.pair.Step, "error", err)
	}
}

// CloseCutOff returns what queues, on the pipeline of the cut-off call's usage entry,
// taking the call's token off the pair's open calls: once recorded, it is not handed out
// again. (Were it handed out again — the pipeline lost — its second entry has the same
// call key, a no-op in the ledger.)
func (s *Store) CloseCutOff(ctx context.Context, p Pair, token string) func(redis.Pipeliner) {
	_, _, openKey := keys(p)
	return func(pipe redis.Pipeliner) { pipe.SRem(ctx, openKey, token) }
}
