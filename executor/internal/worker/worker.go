// Package worker runs the asynq servers of the named queues of the executor's class (cpu or
// gpu), each queue with its concurrency from the registry, and restarts a queue's servers
// when its registry row changes. SIGTERM drains: in-flight tasks finish within the grace
// period or go back to their queue.
//
// A queue whose concurrency exceeds Options.ShardSize is served by several asynq servers
// that split its concurrency: an asynq server takes tasks off Redis in one goroutine, one
// task and up to one Redis round trip per priority tier at a time, and with a thousand
// handlers competing for two cores that one goroutine, not the handlers, limited how fast
// finished slots were refilled (docs/PERFORMANCE.md, executor).
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/periodic"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Options configure the worker.
type Options struct {
	// Class is "cpu" or "gpu": the class of queues served.
	Class string
	// Only, when set, restricts the served queues to these names; each must be of Class.
	Only []string
	// TaskCheckInterval is how long an idle server waits before polling again; default 5ms.
	TaskCheckInterval time.Duration
	// ShutdownTimeout is the drain grace period; default 30s.
	ShutdownTimeout time.Duration
	// ShardSize is the most handlers one asynq server runs; a queue of higher concurrency
	// gets ceil(concurrency/ShardSize) servers sharing it. Default 250.
	ShardSize int
	// Redis, when set, enables fast recovery of dead workers' tasks (queue.RecoverOrphans),
	// checked every RecoverInterval (default 2s).
	Redis           redis.UniversalClient
	RecoverInterval time.Duration
	// IdleWait is the longest an idle queue waits for a push announcement before it looks
	// for work anyway (queue.Wakeup); default 1s. Negative turns wake-ups off: idle queues poll
	// every TaskCheckInterval.
	IdleWait time.Duration
	// Notifier delivers registry changes (NOTIFY registry_changed); when nil the worker opens
	// one of its own, started and stopped with it.
	Notifier *postgres.Notifier
}

// Worker manages the asynq servers.
type Worker struct {
	db      *pgxpool.Pool
	redis   asynq.RedisConnOpt
	handler asynq.Handler
	opts    Options
	log     *slog.Logger

	mu       sync.Mutex
	servers  map[string]*served
	stopped  bool
	cancel   context.CancelFunc
	follows  sync.WaitGroup
	ownsNote bool   // opts.Notifier was opened by Start
	unfollow func() // ends the registry subscription
	recovery *periodic.Loop
	wake     *queue.Wakeup // nil: idle queues poll
	wakeRDB  redis.UniversalClient
}

type served struct {
	srvs    []*asynq.Server
	clients []redis.UniversalClient // one per server, closed after it
	spec    spec
}

// shutdown drains the queue's servers together.
func (s *served) shutdown() {
	var wg sync.WaitGroup
	for _, srv := range s.srvs {
		wg.Go(srv.Shutdown)
	}
	wg.Wait()
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// shards splits a concurrency into the fewest parts of at most size, as equal as can be.
func shards(concurrency, size int) []int {
	n := max(1, (concurrency+size-1)/size)
	parts := make([]int, n)
	for i := range parts {
		parts[i] = concurrency / n
		if i < concurrency%n {
			parts[i]++
		}
	}
	return parts
}

// spec is what a queue's server is built from; a change restarts the server.
type spec struct {
	Name        string
	Class       string
	Concurrency int
}

// New returns a worker; call Start.
func New(db *pgxpool.Pool, redis asynq.RedisConnOpt, handler asynq.Handler, opts Options, log *slog.Logger) *Worker {
	if opts.TaskCheckInterval == 0 {
		opts.TaskCheckInterval = 5 * time.Millisecond
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.ShardSize <= 0 {
		opts.ShardSize = 250
	}
	if opts.RecoverInterval == 0 {
		opts.RecoverInterval = 2 * time.Second
	}
	if opts.IdleWait == 0 {
		opts.IdleWait = time.Second
	}
	return &Worker{db: db, redis: redis, handler: handler, opts: opts, log: log, servers: map[string]*served{}}
}

// Start starts a server for every queue of the class and follows registry changes until
// ctx ends. It fails when a queue named in Only is missing or of the other class.
func (w *Worker) Start(ctx context.Context) error {
	ctx, w.cancel = context.WithCancel(ctx)
	if w.opts.IdleWait > 0 {
		w.startWakeups(ctx)
	}
	if err := w.sync(ctx); err != nil {
		w.cancel()
		w.Stop()
		return err
	}
	w.follow(ctx)
	if w.opts.Redis != nil {
		w.recovery = &periodic.Loop{Every: w.opts.RecoverInterval, Run: w.recoverOnce}
		w.recovery.Start(ctx)
	}
	return nil
}

// startWakeups subscribes to the announcements of pushes onto the queues (queue.Wakeup).
func (w *Worker) startWakeups(ctx context.Context) {
	rdb, ok := w.redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return
	}
	w.wake, w.wakeRDB = queue.NewWakeup(w.opts.IdleWait, w.log), rdb
	w.follows.Go(func() { w.wake.Follow(ctx, rdb) })
}

// Queues returns the names of the queues being served.
func (w *Worker) Queues() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make([]string, 0, len(w.servers))
	for n := range w.servers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Stop stops following the registry, then drains every server. No server starts after
// Stop.
func (w *Worker) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.unfollow != nil {
		w.unfollow()
	}
	if w.ownsNote {
		w.opts.Notifier.Stop()
	}
	w.follows.Wait()
	if w.recovery != nil {
		w.recovery.Stop()
	}
	if w.wake != nil {
		w.wake.Close()
		defer w.wakeRDB.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	var wg sync.WaitGroup
	for name, s := range w.servers {
		wg.Go(func() {
			s.shutdown()
			w.log.Info("queue drained", "queue", name)
		})
	}
	wg.Wait()
	w.servers = map[string]*served{}
}

func (w *Worker) load(ctx context.Context) ([]spec, error) {
	rows, err := w.db.Query(ctx, `SELECT name, class, concurrency FROM queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("reading queues: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[spec])
	if err != nil {
		return nil, fmt.Errorf("reading queues: %w", err)
	}
	var out []spec
	for _, name := range w.opts.Only {
		i := slices.IndexFunc(all, func(s spec) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("queue %q is not registered", name)
		}
		if all[i].Class != w.opts.Class {
			return nil, fmt.Errorf("queue %q is a %s queue; this executor serves %s queues only", name, all[i].Class, w.opts.Class)
		}
	}
	for _, s := range all {
		if s.Class == w.opts.Class && (len(w.opts.Only) == 0 || slices.Contains(w.opts.Only, s.Name)) {
			out = append(out, s)
		}
	}
	return out, nil
}

// sync makes the running servers match the registry.
func (w *Worker) sync(ctx context.Context) error {
	specs, err := w.load(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	want := map[string]spec{}
	for _, s := range specs {
		want[s.Name] = s
	}
	for name, s := range w.servers {
		if ws, ok := want[name]; !ok || ws != s.spec {
			if w.wake != nil {
				w.wake.Kick(name)
			}
			s.shutdown()
			delete(w.servers, name)
			w.log.Info("queue server stopped", "queue", name)
		}
	}
	for name, s := range want {
		if _, ok := w.servers[name]; ok {
			continue
		}
		sv := &served{spec: s}
		parts := shards(s.Concurrency, w.opts.ShardSize)
		for _, c := range parts {
			srv, client, err := w.newServer(s, c)
			if err == nil {
				sv.srvs, sv.clients = append(sv.srvs, srv), append(sv.clients, client)
				err = srv.Start(w.handler)
			}
			if err != nil {
				sv.shutdown()
				return fmt.Errorf("starting server for queue %q: %w", name, err)
			}
		}
		w.servers[name] = sv
		w.log.Info("queue server started", "queue", name, "concurrency", s.Concurrency, "servers", len(parts), "class", s.Class)
	}
	if len(w.servers) == 0 {
		w.log.Warn("no queues to serve", "class", w.opts.Class)
	}
	return nil
}

// newServer builds one server of the queue on a Redis client of its own, which carries the
// wake-up hook when wake-ups are on. Close the client after the server.
func (w *Worker) newServer(s spec, concurrency int) (*asynq.Server, redis.UniversalClient, error) {
	log := w.log.With("queue", s.Name)
	client, ok := w.redis.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, nil, fmt.Errorf("unsupported Redis connection option %T", w.redis)
	}
	if w.wake != nil {
		w.wake.Register(s.Name)
		client.AddHook(w.wake.Hook())
	}
	return asynq.NewServerFromRedisClient(client, asynq.Config{
		Concurrency:              concurrency,
		Queues:                   queue.Tiers(s.Name),
		TaskCheckInterval:        w.opts.TaskCheckInterval,
		DelayedTaskCheckInterval: 500 * time.Millisecond,
		ShutdownTimeout:          w.opts.ShutdownTimeout,
		RetryDelayFunc:           backoff,
		IsFailure:                isFailure,
		Logger:                   queue.Logger(log),
		ErrorHandler: asynq.ErrorHandlerFunc(func(ctx context.Context, t *asynq.Task, err error) {
			if !isFailure(err) {
				return // the runner logged the park
			}
			log.Warn("task attempt failed", "task", t.Type(), "error", err)
		}),
	}), client, nil
}

// backoff is exponential with full jitter: about 1 s, 2 s, 4 s ... capped at 5 minutes. A
// parked run's task comes back after the delay it was parked for.
func backoff(n int, err error, _ *asynq.Task) time.Duration {
	if p, ok := errors.AsType[*queue.Parked](err); ok {
		return p.Delay
	}
	d := time.Second << min(n, 8)
	d = min(d, 5*time.Minute)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// isFailure is false for a parked run: its task comes back without using a retry.
func isFailure(err error) bool {
	_, parked := errors.AsType[*queue.Parked](err)
	return !parked
}

// follow restarts queue servers when the registry's queues change (NOTIFY registry_changed),
// and syncs them after every reconnection of the notifier, since changes may have been
// missed meanwhile.
func (w *Worker) follow(ctx context.Context) {
	resync := func(ctx context.Context) {
		if err := w.sync(ctx); err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error("syncing queues", "error", err)
		}
	}
	if w.opts.Notifier == nil {
		w.opts.Notifier, w.ownsNote = postgres.NewNotifier(w.db, w.log), true
	}
	w.unfollow = w.opts.Notifier.Subscribe("registry_changed", postgres.Handler{
		Resync: resync,
		Notify: func(ctx context.Context, payload string) {
			var msg struct {
				Table string `json:"table"`
			}
			if json.Unmarshal([]byte(payload), &msg) == nil && msg.Table == "queues" {
				resync(ctx)
			}
		},
	})
	if w.ownsNote {
		if err := w.opts.Notifier.Start(ctx); err != nil {
			w.log.Warn("registry changes not followed yet; retrying", "error", err)
		}
	}
}

// recoverOnce requeues the tasks of dead workers; Start runs it every RecoverInterval.
func (w *Worker) recoverOnce(ctx context.Context) {
	ids, err := queue.RecoverOrphans(ctx, w.opts.Redis, w.Queues(), time.Now())
	if err != nil && ctx.Err() == nil {
		w.log.Warn("recovering orphaned tasks", "error", err)
	}
	for _, id := range ids {
		w.log.Warn("requeued the task of a dead worker", "task_id", id)
	}
}
