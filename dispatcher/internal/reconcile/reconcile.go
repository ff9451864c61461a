// Package reconcile repairs what Redis lost or never got: a run that Postgres says is
// queued or running but whose task no longer exists in Redis (the dispatcher crashed
// between recording and enqueueing, an approval's enqueue failed, or Redis lost its data)
// is put back on its queue. Task ids are run ids, so a repair never duplicates a task, and
// executors drop tasks of runs that are not runnable, so it never duplicates a run. It also
// ends the runs paused for approval whose approval deadline passed (APPROVAL_TIMEOUT).
package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/periodic"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// lockKey is the advisory lock that lets one dispatcher replica reconcile at a time.
const lockKey = 0x5359_5243 // "SYRC"

// Requeuer puts a queued run's task on its queue.
type Requeuer interface {
	Requeue(ctx context.Context, runID string) error
}

// TaskLookup finds a task in Redis; *asynq.Inspector satisfies it.
type TaskLookup interface {
	GetTaskInfo(queue, id string) (*asynq.TaskInfo, error)
}

// Chains is the chain coordinator, told again what it missed.
type Chains interface {
	Start(ctx context.Context, chainID string) error
	StepDone(ctx context.Context, runID string) error
	Timeout(ctx context.Context, chainID string) error
}

// Publisher sends journaled events to live subscribers.
type Publisher interface {
	Publish(ctx context.Context, envs ...event.Envelope) error
}

// Reconciler scans for stranded runs.
type Reconciler struct {
	DB       *pgxpool.Pool
	Tasks    TaskLookup
	Requeuer Requeuer
	// Chains, when set, is told of chains whose start, step ends or deadline it missed.
	Chains Chains
	Log    *slog.Logger
	// Events, when set, publishes the events of runs the scan ended to live subscribers
	// (they are journaled whether or not it is set).
	Events Publisher
	// Now is the clock approval deadlines are judged by; default time.Now.
	Now func() time.Time
	// Every is the scan interval; default 5s. Grace is how old a run's last update must be
	// before it is checked, so the dispatch path's own enqueue is never raced; default 10s.
	Every, Grace time.Duration

	loop periodic.Loop
}

// Start scans until Stop.
func (r *Reconciler) Start(ctx context.Context) {
	r.loop = periodic.Loop{Every: cmp.Or(r.Every, 5*time.Second), Run: func(ctx context.Context) {
		n, err := r.Once(ctx)
		if err != nil && ctx.Err() == nil {
			r.Log.Warn("reconciling runs", "error", err)
		}
		if n > 0 {
			r.Log.Info("reconciled runs", "runs", n)
		}
	}}
	r.loop.Start(ctx)
}

// Stop ends the scans.
func (r *Reconciler) Stop() { r.loop.Stop() }

// Once runs one scan and returns how many runs it timed out (their approval deadline
// passed), re-enqueued, and chains it repaired.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	grace := r.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	var cands []runstore.Stranded
	var repairs []runstore.ChainRepair
	var expired []runstore.Expired
	err := pgx.BeginFunc(ctx, r.DB, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, lockKey).Scan(&got); err != nil || !got {
			return err
		}
		var err error
		if expired, err = runstore.New(tx).ExpireApprovals(ctx, now(), ""); err != nil {
			return err
		}
		if cands, err = runstore.New(tx).StrandedRuns(ctx, grace); err != nil || r.Chains == nil {
			return err
		}
		repairs, err = runstore.New(tx).ChainsToRepair(ctx, grace)
		return err
	})
	if err != nil {
		return 0, err
	}
	// One run that cannot be repaired must not keep the others stranded: each is tried, and
	// the failures are reported together.
	n := len(expired)
	var errs []error
	for _, x := range expired {
		r.Log.Info("run timed out waiting for approval", "job_id", x.RunID, "code", apierr.CodeApprovalTimeout)
		if r.Events != nil {
			if err := r.Events.Publish(ctx, x.Event); err != nil {
				r.Log.Warn("publishing the approval timeout's event", "job_id", x.RunID, "error", err)
			}
		}
		// A chain step's end is the coordinator's to act on; should this fail, the scan of
		// chains to repair tells it again.
		if x.ChainID != "" && r.Chains != nil {
			if err := r.Chains.StepDone(ctx, x.RunID); err != nil {
				errs = append(errs, fmt.Errorf("chain %s: step_done: %w", x.ChainID, err))
			}
		}
	}
	for _, c := range repairs {
		if ctx.Err() != nil {
			break
		}
		var err error
		switch c.Kind {
		case "step_done":
			err = r.Chains.StepDone(ctx, c.RunID)
		case "timeout":
			err = r.Chains.Timeout(ctx, c.ChainID)
		case "start":
			err = r.Chains.Start(ctx, c.ChainID)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("chain %s: %s: %w", c.ChainID, c.Kind, err))
			continue
		}
		r.Log.Warn("chain repaired: the coordinator had missed it", "chain_id", c.ChainID, "kind", c.Kind, "job_id", c.RunID)
		n++
	}
	for _, c := range cands {
		if ctx.Err() != nil {
			break
		}
		info, err := r.Tasks.GetTaskInfo(queue.Tier(c.Queue, run.Priority(c.Priority)), c.ID)
		switch {
		case err == nil && info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived:
			continue // its task is live
		case err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound):
			errs = append(errs, fmt.Errorf("run %s: looking up its task: %w", c.ID, err))
			continue
		}
		if err := r.Requeuer.Requeue(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("run %s: re-enqueueing: %w", c.ID, err))
			continue
		}
		r.Log.Warn("run had no task in redis; re-enqueued", "job_id", c.ID, "status", c.Status, "queue", c.Queue)
		n++
	}
	return n, errors.Join(errs...)
}
