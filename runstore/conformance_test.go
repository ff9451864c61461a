package runstore_test

// The store's conformance suite: every statement of sql/ against the real schema (each
// test has a database of its own, cloned from the migrated template), the table of legal
// transitions pair by pair, and the guards that keep concurrent writers apart.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

var allStatuses = []run.Status{run.HeldForReview, run.Queued, run.Running, run.PendingReview, run.Completed,
	run.CompletedMaxIterations, run.CompletedBudgetExhausted, run.Failed, run.TimedOut, run.Cancelled,
	run.Rejected, run.Skipped}

// The table of legal transitions as docs/executor.md documents it. A change to the table in
// shared/run must change this list, and the docs, with it.
var legal = map[run.Status][]run.Status{
	run.HeldForReview: {run.Queued, run.Rejected, run.Cancelled},
	run.Queued:        {run.Running, run.Cancelled, run.Failed, run.Skipped},
	run.Running: {run.Queued, run.PendingReview, run.Completed, run.CompletedMaxIterations,
		run.CompletedBudgetExhausted, run.Failed, run.TimedOut, run.Cancelled, run.Rejected},
	run.PendingReview: {run.Queued, run.Rejected, run.Cancelled, run.TimedOut},
}

func status(t *testing.T, pool *pgxpool.Pool, id string) run.Status {
	t.Helper()
	var st run.Status
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM runs WHERE id = $1`, id).Scan(&st))
	return st
}

func TestTransitionTableEveryPair(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			want := false
			for _, l := range legal[from] {
				want = want || l == to
			}
			require.Equal(t, want, run.CanTransition(from, to), "%s -> %s", from, to)
			id, _ := testkit.NewRun(t, pool, string(from))
			got, err := s.Transition(ctx, id, []run.Status{from}, to, runstore.Change{})
			if want {
				require.NoError(t, err, "%s -> %s", from, to)
				require.Equal(t, from, got)
				require.Equal(t, to, status(t, pool, id))
				continue
			}
			// Refused before the database is asked, with a typed error; nothing moved.
			var te *runstore.TransitionError
			require.ErrorAs(t, err, &te, "%s -> %s", from, to)
			require.True(t, te.Illegal, "%s -> %s", from, to)
			require.Equal(t, from, te.From)
			require.Equal(t, from, status(t, pool, id))
			// Nor does "any legal source" move it: the run is in none of them.
			_, err = s.Transition(ctx, id, nil, to, runstore.Change{})
			require.ErrorAs(t, err, &te, "%s -> %s (any source)", from, to)
			require.Equal(t, from, status(t, pool, id))
		}
	}
	for _, st := range allStatuses {
		_, leaves := legal[st]
		require.Equal(t, !leaves, st.Terminal(), st)
	}
}

func TestTransitionOutsideTheAllowedSourcesIsRefused(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	// Running -> cancelled is legal, but the caller allowed only held, queued or paused runs.
	id, _ := testkit.NewRun(t, pool, "running")
	from, err := s.Transition(ctx, id, []run.Status{run.HeldForReview, run.Queued, run.PendingReview}, run.Cancelled,
		runstore.Change{Error: []byte(`{"code":"CANCELLED"}`)})
	var te *runstore.TransitionError
	require.ErrorAs(t, err, &te)
	require.False(t, te.Illegal)
	require.Equal(t, run.Running, from)
	var errBody *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT error::text FROM runs WHERE id = $1`, id).Scan(&errBody))
	require.Nil(t, errBody)
}

func TestTransitionChangeColumns(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	id, _ := testkit.NewRun(t, pool, "running")

	// A retry: queued again, the attempt's error appended, queued_at kept once set.
	_, err := s.Transition(ctx, id, []run.Status{run.Running}, run.Queued, runstore.Change{AttemptError: []byte(`{"code":"A"}`)})
	require.NoError(t, err)
	_, err = s.Claim(ctx, id)
	require.NoError(t, err)
	// A park: queued with parked_at, parked_until, park_reason and waiting_since.
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Microsecond)
	_, err = s.Transition(ctx, id, nil, run.Queued, runstore.Change{ParkedUntil: &until, ParkReason: "provider_capacity"})
	require.NoError(t, err)
	var parkedUntil, waiting *time.Time
	var reason *string
	require.NoError(t, pool.QueryRow(ctx, `SELECT parked_until, park_reason, waiting_since FROM runs WHERE id = $1`, id).
		Scan(&parkedUntil, &reason, &waiting))
	require.True(t, until.Equal(*parkedUntil))
	require.Equal(t, "provider_capacity", *reason)
	require.NotNil(t, waiting)
	// The pickup that ends the park reports it and clears parked_at.
	w, prev, ok, err := s.ClaimWork(ctx, id, time.Now())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, run.Queued, prev)
	require.NotNil(t, w.ParkedAt)
	require.Equal(t, "provider_capacity", w.ParkReason)
	require.Equal(t, 1, w.Attempts) // as before this claim
	require.NotNil(t, w.WaitingSince)
	// The end: output, final error, warnings, finished_at.
	_, err = s.Transition(ctx, id, []run.Status{run.Running}, run.Failed, runstore.Change{
		Output: []byte(`{"partial":true}`), Error: []byte(`{"code":"B"}`), AttemptError: []byte(`{"code":"B"}`),
		Warnings: []byte(`["w"]`)})
	require.NoError(t, err)
	var attempts int
	var attemptErrors, warnings, output, errBody string
	var finished, queued bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempts, attempt_errors::text, warnings::text, output::text,
		error::text, finished_at IS NOT NULL, queued_at IS NOT NULL FROM runs WHERE id = $1`, id).
		Scan(&attempts, &attemptErrors, &warnings, &output, &errBody, &finished, &queued))
	require.Equal(t, 2, attempts)
	require.JSONEq(t, `[{"code":"A"},{"code":"B"}]`, attemptErrors)
	require.JSONEq(t, `["w"]`, warnings)
	require.JSONEq(t, `{"partial":true}`, output)
	require.JSONEq(t, `{"code":"B"}`, errBody)
	require.True(t, finished)
	require.True(t, queued)
	res, err := s.Result(ctx, id)
	require.NoError(t, err)
	require.Equal(t, run.Failed, res.Status)
	require.JSONEq(t, `{"code":"B"}`, string(res.Error))
}

// Concurrent writers of one run: of racing transitions out of running exactly one moves
// the run and every other is refused with the status the winner left; racing event writes
// take distinct, consecutive numbers.
func TestConcurrencyGuards(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)

	id, orgID := testkit.NewRun(t, pool, "running")
	ends := []run.Status{run.Completed, run.Failed, run.Cancelled, run.TimedOut, run.Queued, run.PendingReview}
	var wg sync.WaitGroup
	errs := make([]error, len(ends))
	for i, to := range ends {
		wg.Go(func() {
			_, errs[i] = s.Transition(ctx, id, []run.Status{run.Running}, to, runstore.Change{})
		})
	}
	wg.Wait()
	final := status(t, pool, id)
	moved := 0
	for i, err := range errs {
		if err == nil {
			moved++
			require.Equal(t, ends[i], final)
			continue
		}
		var te *runstore.TransitionError
		require.ErrorAs(t, err, &te)
		require.Equal(t, final, te.From)
	}
	require.Equal(t, 1, moved)

	const writers, each = 8, 5
	for range writers {
		wg.Go(func() {
			for range each {
				d, err := event.NewDraft(event.JobProgress, map[string]any{})
				if err != nil {
					panic(err)
				}
				b := &pgx.Batch{}
				runstore.QueueEvents(b, id, orgID, []event.Draft{d, d})
				if err := s.SendBatch(ctx, b); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	got, err := s.Replay(ctx, orgID, id, 0)
	require.NoError(t, err)
	require.Len(t, got, writers*each*2)
	for i, e := range got {
		require.EqualValues(t, i+1, e.Seq)
	}
}

func TestWorkQueries(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)

	_, err := s.LoadWork(ctx, uuid.NewString())
	require.ErrorIs(t, err, runstore.ErrNotFound)
	_, _, ok, err := s.ClaimWork(ctx, uuid.NewString(), time.Now())
	require.NoError(t, err)
	require.False(t, ok)

	id, orgID := testkit.NewRun(t, pool, "queued")
	w, err := s.LoadWork(ctx, id)
	require.NoError(t, err)
	require.Equal(t, orgID, w.OrgID)
	require.Equal(t, run.Queued, w.Status)
	require.Equal(t, "llm_only", w.ExecutionType)
	require.Nil(t, w.StartedAt)

	// Cancellation is only requested of a running run, and then no claim takes it.
	ok, err = s.RequestCancel(ctx, orgID, id)
	require.NoError(t, err)
	require.False(t, ok)
	_, err = s.Claim(ctx, id)
	require.NoError(t, err)
	ok, err = s.RequestCancel(ctx, uuid.NewString(), id) // another organisation's
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = s.RequestCancel(ctx, orgID, id)
	require.NoError(t, err)
	require.True(t, ok)
	requested, err := s.CancelRequested(ctx, id)
	require.NoError(t, err)
	require.True(t, requested)
	_, _, ok, err = s.ClaimWork(ctx, id, time.Now())
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, s.AddHoldReasons(ctx, id, []map[string]any{{"code": "X"}}))
	require.NoError(t, s.AddHoldReasons(ctx, id, []map[string]any{{"code": "Y"}}))
	r, err := s.GetRun(ctx, orgID, id)
	require.NoError(t, err)
	holds, err := json.Marshal(r.HoldReasons)
	require.NoError(t, err)
	require.JSONEq(t, `[{"code":"X"},{"code":"Y"}]`, string(holds))
}

func TestJournal(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	id, _ := testkit.NewRun(t, pool, "running")

	var got map[string]any
	_, ok, err := s.Journaled(ctx, id, "step-1", &got)
	require.NoError(t, err)
	require.False(t, ok)
	written, err := s.Journal(ctx, id, "step-1", "tool_result", map[string]any{"v": 1})
	require.NoError(t, err)
	require.True(t, written)
	written, err = s.Journal(ctx, id, "step-1", "tool_result", map[string]any{"v": 2})
	require.NoError(t, err)
	require.False(t, written, "a step is journaled once")
	at, ok, err := s.Journaled(ctx, id, "step-1", &got)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, at.IsZero())
	require.EqualValues(t, 1, got["v"])

	// A paid answer is journaled and billed together, once.
	_, err = pool.Exec(ctx, `UPDATE runs SET waiting_since = now() WHERE id = $1`, id)
	require.NoError(t, err)
	use := runstore.Usage{TokensIn: 10, TokensOut: 20, TokensCached: 3, CostUSD: 0.5}
	tot, ok, err := s.JournalLLMAnswer(ctx, id, "llm-1", use, []byte(`{"answer":1}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, runstore.Totals{TokensIn: 10, TokensOut: 20, CostUSD: 0.5, LLMCalls: 1}, tot)
	_, ok, err = s.JournalLLMAnswer(ctx, id, "llm-1", use, []byte(`{"answer":2}`))
	require.NoError(t, err)
	require.False(t, ok)
	tot, ok, err = s.JournalLLMAnswer(ctx, id, "llm-2", use, []byte(`{"answer":3}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, runstore.Totals{TokensIn: 20, TokensOut: 40, CostUSD: 1, LLMCalls: 2}, tot)
	var cached int64
	var waiting *time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT tokens_cached, waiting_since FROM runs WHERE id = $1`, id).Scan(&cached, &waiting))
	require.EqualValues(t, 6, cached)
	require.Nil(t, waiting, "an answered call ends the wait for capacity")
}

func newRunRow(id, orgID, key, status string) runstore.NewRun {
	return runstore.NewRun{ID: id, OrgID: orgID, TraceID: uuid.NewString(), JobType: "x", SkillVersion: 1,
		ExecutionType: "llm_only", Queue: "default", Priority: "normal", Status: status, Payload: []byte(`{}`),
		IdempotencyKey: key}
}

func TestDispatchWrites(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	orgID := testkit.NewOrg(t, pool)
	var digest [32]byte
	_, err := pool.Exec(ctx, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, '{"max_retries":7}')`,
		digest[:], orgID)
	require.NoError(t, err)

	// Runs, their batch, spans and first events: one round trip.
	batchID, a, b := uuid.NewString(), uuid.NewString(), uuid.NewString()
	var rb runstore.RunBatch
	na, nb := newRunRow(a, orgID, "k-a", "queued"), newRunRow(b, orgID, "", "held_for_review")
	na.SkillSnapshotDigest, nb.SkillSnapshotDigest = digest, digest
	na.BatchID, nb.BatchID = batchID, batchID
	rb.Add(na)
	rb.Add(nb)
	var firsts runstore.Firsts
	ea, err := firsts.Add(a, orgID, event.JobQueued, map[string]any{"n": 1})
	require.NoError(t, err)
	_, err = firsts.Add(b, orgID, event.JobHeld, map[string]any{"n": 2})
	require.NoError(t, err)
	batch := &pgx.Batch{}
	runstore.QueueNewBatch(batch, batchID, orgID, 2)
	rb.Queue(batch)
	firsts.Queue(batch)
	require.NoError(t, s.SendBatch(ctx, batch))
	require.Equal(t, 2, rb.Inserted())
	require.False(t, ea.TS.IsZero())

	ra, err := s.GetRun(ctx, orgID, a)
	require.NoError(t, err)
	require.EqualValues(t, "queued", ra.Status)
	require.NotNil(t, ra.Timings.QueuedAt)
	require.Equal(t, batchID, ra.BatchID)
	_, err = s.GetRun(ctx, uuid.NewString(), a)
	require.ErrorIs(t, err, runstore.ErrNotFound, "another organisation's run is not found")

	// A taken idempotency key writes nothing of its run.
	var dup runstore.RunBatch
	dup.Add(newRunRow(uuid.NewString(), orgID, "k-a", "queued"))
	batch = &pgx.Batch{}
	dup.Queue(batch)
	require.NoError(t, s.SendBatch(ctx, batch))
	require.Zero(t, dup.Inserted())
	keyed, err := s.RunsByIdempotencyKeys(ctx, orgID, []string{"k-a", "k-none"})
	require.NoError(t, err)
	require.Len(t, keyed, 1)
	require.Equal(t, a, keyed["k-a"].ID)

	live, err := s.LiveRuns(ctx, orgID, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, live) // b is held
	runs, err := s.ListRuns(ctx, orgID, runstore.ListFilter{Statuses: []string{"held_for_review"}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, b, runs[0].JobID)
	runs, err = s.ListRuns(ctx, orgID, runstore.ListFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, runs, 2)

	e, err := s.GetEnqueueInfo(ctx, a)
	require.NoError(t, err)
	require.Equal(t, 7, e.MaxRetries)
	data, err := s.LastEventData(ctx, b, event.JobHeld)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":2}`, string(data))
	data, err = s.LastEventData(ctx, b, event.JobCompleted)
	require.NoError(t, err)
	require.Nil(t, data)
	chain, err := s.RunChain(ctx, orgID, a)
	require.NoError(t, err)
	require.Empty(t, chain)
	_, err = s.RunChain(ctx, uuid.NewString(), a)
	require.ErrorIs(t, err, runstore.ErrNotFound)

	require.NoError(t, s.DeleteRuns(ctx, orgID, []string{a}))
	_, err = s.GetRun(ctx, orgID, a)
	require.ErrorIs(t, err, runstore.ErrNotFound)
	require.NoError(t, s.InsertBatch(ctx, uuid.NewString(), orgID, 1))
}

func TestReviewInOneTransaction(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	id, orgID := testkit.NewRun(t, pool, "held_for_review")
	// A failure after the transition inside InTx leaves the run as it was.
	boom := errors.New("boom")
	err := runstore.New(pool).InTx(ctx, func(tx *runstore.Store) error {
		if _, err := tx.Transition(ctx, id, []run.Status{run.HeldForReview}, run.Queued, runstore.Change{}); err != nil {
			return err
		}
		if _, err := tx.RecordEvent(ctx, id, orgID, event.JobApproved, map[string]any{}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, run.HeldForReview, status(t, pool, id))
	evs, err := runstore.New(pool).Replay(ctx, orgID, id, 0)
	require.NoError(t, err)
	require.Empty(t, evs)
}

func TestStrandedAndCallbacks(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	s := runstore.New(pool)
	stale, _ := testkit.NewRun(t, pool, "queued")
	fresh, _ := testkit.NewRun(t, pool, "running")
	done, orgID := testkit.NewRun(t, pool, "completed")
	_, err := pool.Exec(ctx, `UPDATE runs SET updated_at = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`,
		[]string{stale, done})
	require.NoError(t, err)
	got, err := s.StrandedRuns(ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, stale, got[0].ID)
	require.NotEqual(t, fresh, got[0].ID)

	// A finished run with a callback URL is claimed once per lease.
	_, err = pool.Exec(ctx, `UPDATE runs SET callback_url = 'https://example.test/cb', finished_at = now() WHERE id = $1`, done)
	require.NoError(t, err)
	dues, err := s.ClaimCallbacks(ctx)
	require.NoError(t, err)
	require.Len(t, dues, 1)
	require.Equal(t, done, dues[0].ID)
	require.Equal(t, orgID, dues[0].OrgID)
	require.NotEmpty(t, dues[0].Secret)
	dues, err = s.ClaimCallbacks(ctx)
	require.NoError(t, err)
	require.Empty(t, dues, "leased")
	require.NoError(t, s.RetryCallback(ctx, done, 1, -time.Second)) // due again at once
	dues, err = s.ClaimCallbacks(ctx)
	require.NoError(t, err)
	require.Len(t, dues, 1)
	require.Equal(t, 1, dues[0].Attempts)
	require.NoError(t, s.EndCallback(ctx, done, 2, "delivered"))
	var st string
	require.NoError(t, pool.QueryRow(ctx, `SELECT callback_status FROM runs WHERE id = $1`, done).Scan(&st))
	require.Equal(t, "delivered", st)
	_, err = pool.Exec(ctx, `UPDATE runs SET callback_next_at = NULL WHERE id = $1`, done)
	require.NoError(t, err)
	dues, err = s.ClaimCallbacks(ctx)
	require.NoError(t, err)
	require.Empty(t, dues, "done")
}
