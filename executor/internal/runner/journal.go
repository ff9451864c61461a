package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sethvargo/go-retry"

	"github.com/switchyard-ai/switchyard/executor/internal/metrics"
)

// journaled returns the journal entry stored under step, if any. A run's first attempt has
// none to find and does not look: an attempt racing it is resumed and does, and journal
// refuses a step written twice.
func (x *execution) journaled(ctx context.Context, step string, dst any) (bool, error) {
	if !x.resumed {
		return false, nil
	}
	_, ok, err := x.runs().Journaled(ctx, x.run.ID, step, dst)
	return ok, err
}

// journal appends an entry under step. It reports false when the step was journaled
// already (by an earlier attempt), in which case nothing was written.
func (x *execution) journal(ctx context.Context, step, kind string, data any) (bool, error) {
	return x.runs().Journal(ctx, x.run.ID, step, kind, data)
}

// journalTryTimeout bounds one try of a journal write. A try runs to its end even when the
// attempt's context ends meanwhile: an answer arriving at the deadline is still kept.
const journalTryTimeout = 5 * time.Second

// journalBackoff is the wait between tries of a journal write: exponential from 50 ms,
// capped at 2 s, with jitter so that the executors of a platform whose Postgres comes back
// do not all retry at once.
func journalBackoff() retry.Backoff {
	return retry.WithJitterPercent(20, retry.WithCappedDuration(2*time.Second, retry.NewExponential(50*time.Millisecond)))
}

// persist performs a journal write that records an effect that has happened already — a
// paid LLM answer, a tool's answer — so that it is never requested again. A try that fails
// for a reason another try can change (Postgres unreachable, restarting, out of
// connections, a serialization failure) is retried with backoff while the attempt has time:
// until its context ends (the task's timeout, the run's deadline, cancellation, shutdown).
// Only then is the effect given up and the error returned. A write Postgres refuses for its
// data is not retried.
func (x *execution) persist(ctx context.Context, kind, step string, write func(ctx context.Context) error) error {
	started := time.Now()
	tries := 0
	var last error
	try := func(context.Context) error {
		tries++
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalTryTimeout)
		defer cancel()
		if last = write(tctx); last != nil && transient(last) {
			return retry.RetryableError(last)
		}
		return last
	}
	// The first try does not depend on ctx: the answer is here, and writing it is cheap.
	err := try(ctx)
	if err != nil && last != nil && transient(last) {
		x.log.Warn("journal write failed; retrying while the attempt has time", "step", step, "kind", kind, "error", last)
		err = retry.Do(ctx, journalBackoff(), try)
	}
	switch {
	case err == nil && tries == 1:
		x.Metrics.JournalWrite(kind, metrics.JournalOK, time.Since(started))
	case err == nil:
		x.Metrics.JournalWrite(kind, metrics.JournalAfterRetry, time.Since(started))
		x.log.Info("journal write succeeded after retries", "step", step, "kind", kind, "tries", tries,
			"waited_ms", time.Since(started).Milliseconds())
	default:
		x.Metrics.JournalWrite(kind, metrics.JournalFailed, time.Since(started))
		x.log.Error("journal write given up", "step", step, "kind", kind, "tries", tries, "error", last,
			"attempt_error", ctx.Err())
		return fmt.Errorf("journaling step %s: %w", step, last)
	}
	return nil
}

// transient reports whether another try of a failed statement may succeed: a network or
// pool failure, or a Postgres error of class 08 (connection), 40 (transaction rollback),
// 53 (insufficient resources), 55 (object not in prerequisite state), 57 (operator
// intervention: shutdown, restart) or 58 (system error). Data, constraint and syntax
// errors are not.
func transient(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	switch pe.Code[:2] {
	case "08", "40", "53", "55", "57", "58":
		return true
	}
	return false
}
