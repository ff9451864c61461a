package ledger

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Options tune a Writer; zero values take the defaults.
type Options struct {
	// Batch is the most entries one Postgres statement moves; default 500.
	Batch int
	// Linger is how long the mover lets entries gather after a batch that was not full, so
	// a steady trickle becomes a few statements a second rather than one per call; default
	// 100 ms.
	Linger time.Duration
	// ClaimIdle is how long an entry a replica read stays unwritten before another replica
	// takes it over (the first one died or cannot reach Postgres); default 30 s.
	ClaimIdle time.Duration
	// SyncTimeout bounds the write to Postgres when Redis refuses an entry; default 2 s.
	SyncTimeout time.Duration
	// MaxBackoff caps the pause between attempts while Postgres (or, for entries held in
	// memory, both stores) cannot be written; default 5 s.
	MaxBackoff time.Duration
	// Consumer names this replica in the consumer group; default host-pid-random.
	Consumer string
	// Metrics receives counts and gauges; nil: none.
	Metrics Metrics
}

// Writer records entries and moves them into Postgres. Call Start and Stop.
type Writer struct {
	db   *pgxpool.Pool
	rdb  redis.UniversalClient
	log  *slog.Logger
	opts Options
	m    Metrics

	mu   sync.Mutex
	held []Entry       // entries both stores refused, oldest first
	kick chan struct{} // wakes the retry of held entries

	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a writer on db and rdb.
func New(db *pgxpool.Pool, rdb redis.UniversalClient, log *slog.Logger, opts Options) *Writer {
	opts.Batch = cmp.Or(opts.Batch, 500)
	opts.Linger = cmp.Or(opts.Linger, 100*time.Millisecond)
	opts.ClaimIdle = cmp.Or(opts.ClaimIdle, 30*time.Second)
	opts.SyncTimeout = cmp.Or(opts.SyncTimeout, 2*time.Second)
	opts.MaxBackoff = cmp.Or(opts.MaxBackoff, 5*time.Second)
	if opts.Consumer == "" {
		host, _ := os.Hostname()
		opts.Consumer = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "router"), os.Getpid(), NewToken()[:8])
	}
	m := opts.Metrics
	if m == nil {
		m = nopMetrics{}
	}
	return &Writer{db: db, rdb: rdb, log: log, opts: opts, m: m, kick: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Start creates the consumer group if it is missing and starts the mover and the retry of
// held entries.
func (w *Writer) Start(ctx context.Context) error {
	if err := w.ensureGroup(ctx); err != nil {
		return fmt.Errorf("creating the usage ledger's consumer group: %w", err)
	}
	w.wg.Go(w.move)
	w.wg.Go(w.retryHeld)
	return nil
}

// Stop ends the mover after the batch it is writing, and tries the entries held in memory
// until ctx ends; what is still held then is logged whole, the last place it exists.
// Entries in the stream stay there for the other replicas or the next start.
func (w *Writer) Stop(ctx context.Context) {
	close(w.stop)
	w.wg.Wait()
	for backoff := 0; ; backoff++ {
		if w.flushHeld(ctx) == 0 {
			return
		}
		if !sleep(ctx, nil, w.backoff(backoff)) {
			break
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.held {
		w.log.Error("usage entry lost at shutdown: Redis and Postgres refused it; recover it from this line",
			"call_key", e.CallKey, "org_id", e.OrgID, "job_id", e.RunID, "entry", e)
	}
}

// Record stores e durably before it returns: in the Redis stream, together with whatever
// also queues on the same pipeline (one round trip); if Redis refuses it, in Postgres;
// if both refuse it, in memory, retried until one takes it. It never drops an entry.
// ctx should not be the caller's: a caller that went away must not abort the record.
func (w *Writer) Record(ctx context.Context, e Entry, also ...func(redis.Pipeliner)) {
	w.RecordAll(ctx, []Entry{e}, also...)
}

// RecordAll is Record for several entries (distinct call keys) in one round trip.
func (w *Writer) RecordAll(ctx context.Context, entries []Entry, also ...func(redis.Pipeliner)) {
	if len(entries) == 0 {
		return
	}
	pipe := w.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(entries))
	for i := range entries {
		e := &entries[i]
		if e.At.IsZero() {
			e.At = time.Now().UTC()
		}
		if e.CallKey == "" {
			e.CallKey = NewToken()
		}
		raw, err := e.encode()
		if err != nil { // only plain fields: cannot happen
			w.log.Error("encoding usage entry", "call_key", e.CallKey, "error", err)
		}
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: streamKey, Values: []any{fieldEntry, raw}})
	}
	for _, f := range also {
		if f != nil {
			f(pipe)
		}
	}
	_, _ = pipe.Exec(ctx)
	var refused []Entry
	for i, add := range adds {
		if err := add.Err(); err != nil {
			w.log.Warn("Redis refused a usage entry; writing it to Postgres", "call_key", entries[i].CallKey,
				"org_id", entries[i].OrgID, "error", err)
			refused = append(refused, entries[i])
			continue
		}
		w.m.Recorded(PathStream)
	}
	if len(refused) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, w.opts.SyncTimeout)
	_, err := insert(pctx, w.db, refused)
	cancel()
	if err == nil {
		for range refused {
			w.m.Recorded(PathPostgres)
		}
		return
	}
	w.mu.Lock()
	for _, e := range refused {
		w.log.Error("Redis and Postgres refused a usage entry; holding it in memory and retrying",
			"call_key", e.CallKey, "org_id", e.OrgID, "job_id", e.RunID, "error", err)
		w.m.Recorded(PathMemory)
		w.held = append(w.held, e)
	}
	w.m.Held(len(w.held))
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// retryHeld moves entries held in memory into the stream (or Postgres) as soon as one of
// the stores takes them, with backoff while neither does.
func (w *Writer) retryHeld() {
	failures := 0
	for {
		if w.heldCount() == 0 {
			failures = 0
			select {
			case <-w.stop:
				return
			case <-w.kick:
			}
			continue
		}
		if !sleep(context.Background(), w.stop, w.backoff(failures)) {
			return
		}
		if w.flushHeld(context.Background()) > 0 {
			failures++
		} else {
			failures = 0
		}
	}
}

func (w *Writer) heldCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// flushHeld tries the held entries, stream first, and returns how many are still held.
func (w *Writer) flushHeld(ctx context.Context) int {
	w.mu.Lock()
	batch := w.held
	w.held = nil
	w.mu.Unlock()
	if len(batch) == 0 {
		return 0
	}
	var left []Entry
	pipe := w.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(batch))
	for i, e := range batch {
		raw, _ := e.encode()
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: streamKey, Values: []any{fieldEntry, raw}})
	}
	_, _ = pipe.Exec(ctx)
	for i, add := range adds {
		if add.Err() != nil {
			left = append(left, batch[i])
		}
	}
	if len(left) > 0 {
		pctx, cancel := context.WithTimeout(ctx, w.opts.SyncTimeout)
		if _, err := insert(pctx, w.db, dedupe(left)); err == nil {
			left = nil
		}
		cancel()
	}
	if len(left) < len(batch) {
		w.log.Info("usage entries held in memory are stored", "count", len(batch)-len(left))
	}
	w.mu.Lock()
	w.held = append(left, w.held...)
	n := len(w.held)
	w.m.Held(n)
	w.mu.Unlock()
	return n
}

// backoff is the pause after the n-th consecutive failure: 100 ms doubling to MaxBackoff,
// with jitter so replicas do not retry in step.
func (w *Writer) backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n, 16)
	if d > w.opts.MaxBackoff || d <= 0 {
		d = w.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d, or less when ctx ends or stop closes (then it returns false).
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// dedupe keeps one entry of each call key — the first answered one, else the first — as
// one statement cannot write a key twice: an answered entry is what the call cost, an
// unknown one only that it was made.
func dedupe(entries []Entry) []Entry {
	at := make(map[string]int, len(entries))
	out := entries[:0:0]
	for _, e := range entries {
		i, seen := at[e.CallKey]
		switch {
		case !seen:
			at[e.CallKey] = len(out)
			out = append(out, e)
		case out[i].Outcome == OutcomeUnknown && e.Outcome != OutcomeUnknown:
			out[i] = e
		}
	}
	return out
}
