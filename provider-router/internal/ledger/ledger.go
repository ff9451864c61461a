// Package ledger writes one usage row per LLM call, off the request's critical path: calls
// hand entries to a buffered writer that batches them into Postgres (COPY) together with
// the organisation's monthly token counter. When the buffer is full the caller writes its
// own entry rather than drop it: billing data is never lost to keep latency low.
package ledger

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Entry is one LLM call.
type Entry struct {
	OrgID, UserID, RunID, ChainID, JobType string
	Provider, Model                        string
	TokensIn, TokensOut, TokensCached      int64
	CostUSD                                float64
	Latency, QueueWait                     time.Duration
	At                                     time.Time
}

// Writer batches entries into Postgres.
type Writer struct {
	db     *pgxpool.Pool
	log    *slog.Logger
	in     chan Entry
	flush  time.Duration
	batch  int
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// NewWriter returns a writer with a buffer of size entries; call Start and Stop.
func NewWriter(db *pgxpool.Pool, log *slog.Logger, size int) *Writer {
	return &Writer{db: db, log: log, in: make(chan Entry, size), flush: 100 * time.Millisecond, batch: 500}
}

// Start runs the background writer.
func (w *Writer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { w.loop(ctx) })
}

// Stop writes what is buffered and returns.
func (w *Writer) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Record hands an entry to the writer; when the buffer is full it writes synchronously.
func (w *Writer) Record(ctx context.Context, e Entry) {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	select {
	case w.in <- e:
	default:
		if err := w.write(ctx, []Entry{e}); err != nil {
			w.log.Error("writing usage entry", "org_id", e.OrgID, "job_id", e.RunID, "error", err)
		}
	}
}

func (w *Writer) loop(ctx context.Context) {
	t := time.NewTicker(w.flush)
	defer t.Stop()
	var buf []Entry
	flush := func() {
		if len(buf) == 0 {
			return
		}
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.write(wctx, buf); err != nil {
			w.log.Error("writing usage entries", "entries", len(buf), "error", err)
		}
		cancel()
		buf = buf[:0]
	}
	for {
		select {
		case e := <-w.in:
			buf = append(buf, e)
			if len(buf) >= w.batch {
				flush()
			}
		case <-t.C:
			flush()
		case <-ctx.Done():
			for {
				select {
				case e := <-w.in:
					buf = append(buf, e)
				default:
					flush()
					return
				}
			}
		}
	}
}

func (w *Writer) write(ctx context.Context, entries []Entry) error {
	return pgx.BeginFunc(ctx, w.db, func(tx pgx.Tx) error {
		rows := make([][]any, len(entries))
		months := map[[2]string]int64{}
		for i, e := range entries {
			rows[i] = []any{e.OrgID, e.UserID, nullUUID(e.RunID), nullUUID(e.ChainID), e.JobType, e.Provider, e.Model,
				e.TokensIn, e.TokensOut, e.TokensCached, e.CostUSD, int32(e.Latency.Milliseconds()),
				int32(e.QueueWait.Milliseconds()), e.At}
			months[[2]string{e.OrgID, e.At.UTC().Format("2006-01") + "-01"}] += e.TokensIn + e.TokensOut
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"usage_ledger"}, []string{"org_id", "user_id", "run_id",
			"chain_id", "job_type", "provider", "model", "tokens_in", "tokens_out", "tokens_cached", "cost_usd",
			"latency_ms", "queue_wait_ms", "created_at"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		for k, tokens := range months {
			if _, err := tx.Exec(ctx, `INSERT INTO org_monthly_usage (org_id, month, tokens) VALUES ($1, $2, $3)
				ON CONFLICT (org_id, month) DO UPDATE SET tokens = org_monthly_usage.tokens + EXCLUDED.tokens`,
				k[0], k[1], tokens); err != nil {
				return err
			}
		}
		return nil
	})
}

func nullUUID(s string) any {
	if s == "" {
		return nil
	}
	return s
}
