package runner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// Run is what a worker needs of a run row, as the run store reads it.
type Run = runstore.Work

// The runner's narrow views of the run store (runstore.Store), by what it does with a run.
type (
	// runReader picks runs up and reads what a worker decides on.
	runReader interface {
		ClaimWork(ctx context.Context, id string, started time.Time) (runstore.Work, run.Status, bool, error)
		LoadWork(ctx context.Context, id string) (runstore.Work, error)
		CancelRequested(ctx context.Context, runID string) (bool, error)
		Result(ctx context.Context, runID string) (runstore.Result, error)
	}
	// runWriter moves runs and writes what the attempt buffered (spans and events queued
	// with runstore.QueueTransition, runstore.QueueEvents and runstore.SpanBatch).
	runWriter interface {
		Transition(ctx context.Context, runID string, from []run.Status, to run.Status, c runstore.Change) (run.Status, error)
		Refused(ctx context.Context, runID string, to run.Status) (run.Status, error)
		SendBatch(ctx context.Context, b *pgx.Batch) error
		InTx(ctx context.Context, fn func(tx *runstore.Store) error) error
	}
	// replayJournal is the run's replay journal.
	replayJournal interface {
		Journaled(ctx context.Context, runID, step string, dst any) (time.Time, bool, error)
		Journal(ctx context.Context, runID, step, kind string, data any) (bool, error)
		JournalLLMAnswer(ctx context.Context, runID, step string, u runstore.Usage, entry []byte) (runstore.Totals, bool, error)
		// LoadSnapshot reads a tier's newest snapshot (tier.Snapshots); flush writes them.
		LoadSnapshot(ctx context.Context, runID, key string) (int, json.RawMessage, bool, error)
	}
	// spanReader reads back, and closes, the spans of earlier attempts.
	spanReader interface {
		ListSpans(ctx context.Context, orgID, runID string) ([]span.Span, error)
		AbandonSpans(ctx context.Context, orgID, runID string, attempt int) ([]span.Span, error)
	}
	// eventReader reads back which announcements earlier attempts wrote (tier.Announcements).
	eventReader interface {
		Announced(ctx context.Context, runID string, types []string) (map[string]bool, bool, error)
	}
	// chainReader reads what remains of a step run's chain.
	chainReader interface {
		PendingSteps(ctx context.Context, chainID string) (int, error)
	}
	// runStore is everything the runner uses of the run store.
	runStore interface {
		runReader
		runWriter
		replayJournal
		spanReader
		eventReader
		chainReader
	}
)

// Compile-time check that the run store is what the runner needs.
var _ runStore = (*runstore.Store)(nil)

// runs is the run store on the runner's pool.
func (r *Runner) runs() runStore { return runstore.New(r.DB) }
