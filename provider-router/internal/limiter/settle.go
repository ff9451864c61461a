package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// settler sends the finish scripts of calls that end close together to Redis in one
// pipeline: a router answering a thousand calls a second would otherwise spend a round
// trip — a pooled connection, a write and a read on both sides — per call only to give
// capacity back. The first finish of a batch waits at most linger for others to join;
// a full batch goes at once. Holding a reservation a few milliseconds longer errs on the
// safe side: it only returns capacity later.
type settler struct {
	l      *Limiter
	linger time.Duration

	mu      sync.Mutex
	pending []*finishing
}

// finishing is one Reservation.Finish waiting for its batch.
type finishing struct {
	r    *Reservation
	d    int // tokens to return (negative: take)
	done chan error
}

// script is the finish's script and arguments: a call admitted from a share (Allowance)
// whose share has closed only corrects the bucket's tokens, since it holds nothing there.
func (f *finishing) script() (*redis.Script, []any) {
	if f.r.share != nil {
		return reconcileScript, []any{f.d}
	}
	return finishScript, []any{f.d, f.r.id}
}

// maxSettleBatch bounds one pipeline, so a burst is sent in several moderate writes.
const maxSettleBatch = 256

// finish runs r's finish script in the next batch and returns its outcome.
func (s *settler) finish(r *Reservation, d int) error {
	f := &finishing{r: r, d: d, done: make(chan error, 1)}
	s.mu.Lock()
	s.pending = append(s.pending, f)
	var full []*finishing
	switch {
	case len(s.pending) >= maxSettleBatch:
		full, s.pending = s.pending, nil
	case len(s.pending) == 1 && s.linger > 0:
		time.AfterFunc(s.linger, s.flush)
	case len(s.pending) == 1:
		full, s.pending = s.pending, nil
	}
	s.mu.Unlock()
	if full != nil {
		s.send(full)
	}
	return <-f.done
}

// flush sends what is pending when the first finish of a batch has lingered enough. A
// batch sent early because it filled up leaves nothing, or the start of the next batch,
// which then goes a little early.
func (s *settler) flush() {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(batch) > 0 {
		s.send(batch)
	}
}

// maxCarried bounds the finishes one admission carries: each is a short script Redis runs
// before the admission's own, so a long queue of them would delay the admission.
const maxCarried = 16

// take removes up to n pending finishes for an admission to carry (see Limiter.runCarrying).
// The linger timer of their batch stays set; when it fires it sends whatever is pending
// then, possibly nothing.
func (s *settler) take(n int) []*finishing {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(n, len(s.pending))
	if k == 0 {
		return nil
	}
	batch := make([]*finishing, k)
	copy(batch, s.pending)
	s.pending = append(s.pending[:0], s.pending[k:]...)
	return batch
}

// send runs a batch's scripts in one pipeline of their own.
func (s *settler) send(batch []*finishing) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	pipe := s.l.rdb.Pipeline()
	cmds := s.queue(ctx, pipe, batch)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	s.deliver(ctx, batch, cmds)
}

// queue adds a batch's finish scripts to pipe.
func (s *settler) queue(ctx context.Context, pipe redis.Pipeliner, batch []*finishing) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(batch))
	for i, f := range batch {
		script, args := f.script()
		cmds[i] = script.EvalSha(ctx, pipe, bucketKeys(f.r.Key), s.l.argv(args...)...)
	}
	return cmds
}

// deliver hands each finish its outcome once the pipeline ran. A script Redis does not
// have cached yet (NOSCRIPT) and a bucket whose limits must first be read from the source
// (codeNoLimits) are run again on their own, the way every other script runs.
func (s *settler) deliver(ctx context.Context, batch []*finishing, cmds []*redis.Cmd) {
	for i, f := range batch {
		v, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") || noLimits(v) {
			script, args := f.script()
			err = s.l.runValue(ctx, script, f.r.Key, args...)
		}
		f.done <- err
	}
}

// noLimits reports a bucket script's answer that the bucket's limits must be seeded first.
func noLimits(v any) bool {
	sl, ok := v.([]any)
	return ok && len(sl) == 1 && toInt(sl[0]) == codeNoLimits
}
