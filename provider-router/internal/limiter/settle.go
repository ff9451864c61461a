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

// send runs a batch's scripts in one pipeline. A script Redis does not have cached yet
// (NOSCRIPT) and a bucket whose limits must first be read from the source (codeNoLimits)
// are run again on their own, the way every other script runs.
func (s *settler) send(batch []*finishing) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	l := s.l
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, f := range batch {
		cmds[i] = finishScript.EvalSha(ctx, pipe, bucketKeys(f.r.Key), l.argv(f.d, f.r.id)...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, f := range batch {
		v, err := cmds[i].Result()
		retry := err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
		if sl, ok := v.([]any); ok && len(sl) == 1 && toInt(sl[0]) == codeNoLimits {
			retry = true
		}
		if retry {
			err = l.runValue(ctx, finishScript, f.r.Key, f.d, f.r.id)
		}
		f.done <- err
	}
}
