// Package app wires the dispatcher: the HTTP server and the background components that
// serve it — the registry cache, the queue consumer tracker, the reconciler and the
// callback sender — with one documented start and stop order. main and the tests build
// the dispatcher through it, so they run the same thing.
package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/api"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/callback"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/governance"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/queueinfo"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/ratelimit"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/reconcile"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/registry"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/session"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/netguard"
	"github.com/switchyard-ai/switchyard/shared/postgres"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
)

// Options configure the dispatcher.
type Options struct {
	DB    *pgxpool.Pool
	Redis redis.UniversalClient
	Asynq asynq.RedisConnOpt
	Log   *slog.Logger
	// TaskRetention keeps finished tasks visible in Redis; default 0 (deleted on completion).
	TaskRetention time.Duration
	// ReconcileEvery, ReconcileGrace and CallbackEvery tune the background loops (defaults
	// 5s, 10s and 500ms).
	ReconcileEvery, ReconcileGrace, CallbackEvery time.Duration
	// Now is the clock approval deadlines are judged by (reviews and the reconciler's
	// sweep); default time.Now. Tests pass a clock they move past a deadline.
	Now func() time.Time
	// Resolver, when set, replaces DNS for callback checks (tests).
	Resolver netguard.Resolver
	// CoordinatorConcurrency is how many chain transitions run at once (of different
	// chains: one chain's are serialised by its lock); default 32.
	CoordinatorConcurrency int
	// CoordinatorStarts is how many chains start at once (default 2): a chain waits to
	// start while the coordinator is busy with the steps of those running.
	CoordinatorStarts int
	// Sealer seals provider API keys to the router's public key; nil: keys cannot be set.
	Sealer *providerstore.Sealer
}

// App is a running dispatcher's components.
type App struct {
	Server     *api.Server
	Registry   *registry.Cache
	Queues     *queueinfo.Tracker
	Reconciler *reconcile.Reconciler
	Callbacks  *callback.Sender
	// Coordinator runs chains; it consumes the coordinator queue.
	Coordinator *chain.Coordinator

	coordinator *coordinatorServer
	coordDB     *pgxpool.Pool
	client      *queue.Client
	batch       *batchQueue
	inspector   *asynq.Inspector
	events      *event.Background
	notifier    *postgres.Notifier
}

// New builds the dispatcher; call Start.
func New(o Options) *App {
	client := queue.NewClient(o.Asynq)
	batch := newBatchQueue(o.Asynq, o.Log)
	inspector := asynq.NewInspector(o.Asynq)
	notifier := postgres.NewNotifier(o.DB, o.Log)
	reg := registry.New(o.DB, o.Log)
	reg.Follow(notifier)
	tracker := &queueinfo.Tracker{Inspector: inspector, Redis: o.Redis, Log: o.Log}
	// Events are journaled before a request answers; publishing them to live subscribers
	// happens in the background, many per round trip.
	events := event.NewBackground(&event.Publisher{Redis: o.Redis}, o.Log)
	svc := &dispatch.Service{
		DB: o.DB, Queue: client, Tasks: inspector, Events: events, Log: o.Log,
		Registry: reg, Limiter: ratelimit.New(o.Redis), Queues: tracker,
		Governor:  &governance.Governor{Quota: &governance.StoreQuota{DB: o.DB}},
		Retention: o.TaskRetention, Resolver: o.Resolver, Redis: o.Redis, Now: o.Now,
	}
	if batch != nil {
		svc.BatchQueue = batch.client
	}
	// The coordinator's transactions hold a connection of a pool of their own while the
	// pipeline, preparing a step inside one, reads the registry and the quota from the main
	// pool: on one pool, as many transitions as connections would wait on each other forever.
	concurrency := cmp.Or(o.CoordinatorConcurrency, 32)
	coordCfg := o.DB.Config().Copy()
	coordCfg.MaxConns, coordCfg.MinConns = int32(concurrency), 0
	coordDB, err := pgxpool.NewWithConfig(context.Background(), coordCfg)
	if err != nil {
		panic(fmt.Sprintf("the coordinator's pool from the dispatcher's configuration: %v", err)) // cannot: the config parsed
	}
	coord := &chain.Coordinator{DB: coordDB, Pipeline: svc, Events: events, Canceller: inspector, Log: o.Log,
		Rules: workflow.NewRules}
	svc.Chains = coord
	return &App{
		Coordinator: coord,
		coordinator: newCoordinatorServer(o.Asynq, coord, concurrency, cmp.Or(o.CoordinatorStarts, 2), o.Log),
		coordDB:     coordDB,
		Server: &api.Server{DB: o.DB, Redis: o.Redis, Inspector: inspector, Log: o.Log,
			Validator: dispatch.NewValidator(), Sessions: &session.Store{Redis: o.Redis}, Dispatch: svc,
			Sealer: o.Sealer},
		Registry: reg,
		Queues:   tracker,
		Reconciler: &reconcile.Reconciler{DB: o.DB, Tasks: inspector, Requeuer: svc, Chains: coord, Events: events, Log: o.Log,
			Now: o.Now, Every: o.ReconcileEvery, Grace: o.ReconcileGrace},
		Callbacks: &callback.Sender{DB: o.DB, Log: o.Log, Every: o.CallbackEvery, Resolver: o.Resolver},
		client:    client, batch: batch, inspector: inspector, events: events, notifier: notifier,
	}
}

// Handler is the HTTP handler.
func (a *App) Handler() *echo.Echo { return a.Server.Handler() }

// Start starts the background components: the registry cache first (so the first requests
// are served from a followed cache), then the tracker, the reconciler and callbacks.
func (a *App) Start(ctx context.Context) {
	if err := a.notifier.Start(ctx); err != nil {
		a.Server.Log.Warn("registry notifications not followed yet; the cache is bypassed until they are", "error", err)
	}
	a.Queues.Start(ctx)
	if err := a.coordinator.start(ctx); err != nil {
		a.Server.Log.Error("the chain coordinator did not start; chains wait until the dispatcher restarts", "error", err)
	}
	a.Reconciler.Start(ctx)
	a.Callbacks.Start(ctx)
}

// Stop stops in reverse order and closes the Redis clients. Stop the HTTP server first.
func (a *App) Stop() {
	a.Server.Dispatch.Close()
	a.Server.CloseLive() // WebSocket clients: hijacked, so http.Server.Shutdown leaves them open
	a.Callbacks.Stop()
	a.Reconciler.Stop()
	a.coordinator.stop()
	a.coordDB.Close()
	a.events.Close() // what the stopped components journaled is published before Redis closes
	a.Queues.Stop()
	a.Registry.Stop()
	a.notifier.Stop()
	_ = a.client.Close()
	a.batch.close()
	_ = a.inspector.Close()
}

// batchQueue is the asynq client batches enqueue through, on go-redis's autopipeliner: the
// concurrent enqueues of a batch (asynq sends one task per call) leave as a few deep
// pipelines instead of one round trip each. Only batches use it; single dispatches keep the
// plain client.
type batchQueue struct {
	client *queue.Client
	auto   *redis.AutoPipeliner
	rdb    io.Closer
}

// newBatchQueue returns nil, and batches use the plain client, when the connection has no
// autopipeliner (a failover client).
func newBatchQueue(opt asynq.RedisConnOpt, log *slog.Logger) *batchQueue {
	rdb, ok := opt.MakeRedisClient().(interface {
		io.Closer
		AutoPipeline() (*redis.AutoPipeliner, error)
	})
	if !ok {
		return nil
	}
	auto, err := rdb.AutoPipeline()
	if err != nil {
		log.Warn("batches enqueue without autopipelining", "error", err)
		_ = rdb.Close()
		return nil
	}
	return &batchQueue{client: queue.NewClientFromRedis(auto), auto: auto, rdb: rdb}
}

func (b *batchQueue) close() {
	if b != nil {
		_ = b.auto.Close() // the asynq client shares the connection and cannot close it
		_ = b.rdb.Close()
	}
}
