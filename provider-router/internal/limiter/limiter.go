// Package limiter is the provider router's admission control: RPM and TPM token buckets per
// (provider credential, model), shared by every router replica through Redis, with one wait
// queue per bucket ordered by job priority, then the progress of the caller's run or chain
// (fewest calls outstanding first), then arrival.
//
// A call reserves one request and its estimated tokens before the provider sees it
// (Acquire), corrects the token estimate once the provider reported usage
// (Reservation.Reconcile) and ends with Reservation.Release. The provider's own view flows
// back through Observe (x-ratelimit-* headers) and Penalize (429 Retry-After). All state
// lives in Redis and is changed only by the Lua scripts beside their callers, so any number
// of replicas share one set of buckets and one queue order. docs/rate-limits.md has the
// algorithm and its guarantees.
package limiter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// BucketKey names one pair of buckets: limits are per provider credential and model, as
// the providers enforce them.
type BucketKey struct {
	Credential string // provider credential id (never the secret itself)
	Model      string
}

// String is the key as logs and errors show it.
func (k BucketKey) String() string { return k.Credential + "/" + k.Model }

// Limits are a bucket pair's per-minute limits; 0 means unlimited.
type Limits struct {
	RPM int
	TPM int
}

// LimitSource returns the configured limits of a bucket the first time a replica finds no
// limits for it in Redis (a new bucket, or Redis lost its data). ok=false means the bucket
// is unlimited.
type LimitSource func(ctx context.Context, key BucketKey) (limits Limits, ok bool, err error)

// Options configure a Limiter. The zero value is usable.
type Options struct {
	// LeaseTTL is how long a waiter keeps its place in a queue without renewing it; waiters
	// renew every LeaseTTL/3, so a crashed replica's waiters stop blocking the queue about
	// LeaseTTL after the crash. Default 10 s.
	LeaseTTL time.Duration
	// HoldTTL bounds how long an admitted, unreleased reservation counts as outstanding for
	// its group; it must exceed the longest provider call. Default 15 min.
	HoldTTL time.Duration
	// Source, when set, supplies limits for buckets that have none in Redis. Without it such
	// buckets are unlimited until SetLimits is called.
	Source LimitSource
	// Metrics receives bucket headroom, queue length and wait times. Default: none.
	Metrics Metrics
	// Logger is for the Pub/Sub listener's trouble. Default: discard.
	Logger *slog.Logger
	// Now, when set, replaces the Redis server's clock in the bucket arithmetic. For tests:
	// waits are still slept on the real clock.
	Now func() time.Time
	// FinishLinger is how long the first Reservation.Finish of a batch waits for others
	// to share its round trip to Redis (see settler). Default 2 ms; negative sends every
	// finish on its own.
	FinishLinger time.Duration
	// Allowance turns on local admission from a replica's share of a bucket (see
	// Allowance). Default: off.
	Allowance Allowance
}

// Limiter admits provider calls against shared buckets. It is safe for concurrent use.
type Limiter struct {
	rdb  redis.UniversalClient
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	waiters map[string]chan struct{} // waiter id -> wake signal (buffered 1)

	settle settler
	shares shares

	stopOnce sync.Once
	pubsub   *redis.PubSub
	done     chan struct{}
}

// New returns a Limiter on rdb. Call Start before Acquire so waiters are woken by Pub/Sub;
// without it they still advance, but only on their refill timers and lease renewals.
func New(rdb redis.UniversalClient, opts Options) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("limiter: rdb is nil")
	}
	if opts.LeaseTTL < 0 {
		return nil, fmt.Errorf("limiter: Options.LeaseTTL %s is negative", opts.LeaseTTL)
	}
	if opts.HoldTTL < 0 {
		return nil, fmt.Errorf("limiter: Options.HoldTTL %s is negative", opts.HoldTTL)
	}
	opts.LeaseTTL = cmp.Or(opts.LeaseTTL, 10*time.Second)
	opts.HoldTTL = cmp.Or(opts.HoldTTL, 15*time.Minute)
	if opts.LeaseTTL < 30*time.Millisecond {
		return nil, fmt.Errorf("limiter: Options.LeaseTTL %s is below 30ms", opts.LeaseTTL)
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.FinishLinger = cmp.Or(opts.FinishLinger, 2*time.Millisecond)
	var err error
	if opts.Allowance, err = opts.Allowance.withDefaults(); err != nil {
		return nil, err
	}
	l := &Limiter{rdb: rdb, opts: opts, log: log, waiters: make(map[string]chan struct{})}
	l.settle = settler{l: l, linger: max(opts.FinishLinger, 0)}
	return l, nil
}

// Start loads the scripts into Redis and subscribes to the wake channel; it returns once the
// subscription is live, so no wake-up published after Start returns is missed.
func (l *Limiter) Start(ctx context.Context) error {
	// Scripts go to Redis once, up front: an admission that carries finishes (runCarrying)
	// must not see its finishes refused as unknown scripts while its own script runs, or it
	// would not count the capacity they return. (After Redis loses its scripts, both are
	// unknown and both run again, in order.) One at a time: Script.Load given a pipeline
	// would record the queued command's empty reply as the script's hash.
	for _, s := range bucketScripts {
		if err := s.Load(ctx, l.rdb).Err(); err != nil {
			return fmt.Errorf("loading the rate-limit scripts: %w", err)
		}
	}
	ps := l.rdb.Subscribe(ctx, wakeChannel)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return fmt.Errorf("subscribing to %s: %w", wakeChannel, err)
	}
	l.pubsub = ps
	l.done = make(chan struct{})
	ch := ps.Channel(redis.WithChannelSize(1024))
	go func() {
		defer close(l.done)
		for msg := range ch {
			l.wake(msg.Payload)
		}
	}()
	return nil
}

// Stop gives back the replica's shares (Allowance) and ends the Pub/Sub listener. Calls
// still waiting keep their places and advance on their timers; stop taking traffic before
// Stop, and close rdb after it.
func (l *Limiter) Stop() {
	l.stopOnce.Do(func() {
		l.dropShares()
		if l.pubsub == nil {
			return
		}
		_ = l.pubsub.Close()
		<-l.done
	})
}

func (l *Limiter) register(id string) chan struct{} {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	l.waiters[id] = ch
	l.mu.Unlock()
	return ch
}

func (l *Limiter) unregister(id string) {
	l.mu.Lock()
	delete(l.waiters, id)
	l.mu.Unlock()
}

func (l *Limiter) wake(id string) {
	l.mu.Lock()
	ch := l.waiters[id]
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default: // already signalled; one look covers both
		}
	}
}

// nowArg is ARGV[2] of every script: the injected clock, or "0" for the server's TIME.
func (l *Limiter) nowArg() string {
	if l.opts.Now == nil {
		return "0"
	}
	return strconv.FormatInt(l.opts.Now().UnixMicro(), 10)
}

// keepMillis is how long a bucket's bookkeeping outlives its last use: long enough for
// every lease and hold in it to expire first.
func (l *Limiter) keepMillis() int64 {
	return (l.opts.HoldTTL + 2*l.opts.LeaseTTL).Milliseconds()
}

// runRaw executes a bucket script. When the script reports that the bucket has no limits
// in Redis and a LimitSource is configured, the limits are fetched, stored (unless another
// replica stored them first) and the script retried once.
func (l *Limiter) runRaw(ctx context.Context, s *redis.Script, key BucketKey, args ...any) (any, error) {
	keys, argv := bucketKeys(key), l.argv(args...)
	for attempt := 0; ; attempt++ {
		v, err := s.Run(ctx, l.rdb, keys, argv...).Result()
		if err != nil {
			return nil, err
		}
		if noLimits(v) && attempt == 0 {
			if err := l.seedLimits(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		return v, nil
	}
}

// argv is a bucket script's ARGV: the wake channel, the clock, args, and the source flag.
func (l *Limiter) argv(args ...any) []any {
	argv := make([]any, 0, len(args)+3)
	argv = append(argv, wakeChannel, l.nowArg())
	argv = append(argv, args...)
	return append(argv, l.sourceFlag())
}

// run executes a bucket script whose reply is an array.
func (l *Limiter) run(ctx context.Context, s *redis.Script, key BucketKey, args ...any) ([]any, error) {
	v, err := l.runRaw(ctx, s, key, args...)
	if err != nil {
		return nil, err
	}
	return replySlice(v)
}

// replySlice is a bucket script's reply as the array every one of them answers.
func replySlice(v any) ([]any, error) {
	sl, ok := v.([]any)
	if !ok || len(sl) == 0 {
		return nil, fmt.Errorf("unexpected script reply %v", v)
	}
	return sl, nil
}

// runCarrying is run for an admission's script, carrying the finishes pending at that
// moment (up to maxCarried) in the same pipeline, ahead of the admission so the capacity
// they return is there when it looks. At a steady rate the next admission leaves before
// a finish's linger runs out, so finishes need no round trip of their own. Should the
// admission's script need a second try (NOSCRIPT, limits to seed), it goes through run.
func (l *Limiter) runCarrying(ctx context.Context, s *redis.Script, key BucketKey, args ...any) ([]any, error) {
	batch := l.settle.take(maxCarried)
	if len(batch) == 0 {
		return l.run(ctx, s, key, args...)
	}
	pipe := l.rdb.Pipeline()
	finishes := l.settle.queue(ctx, pipe, batch)
	own := s.EvalSha(ctx, pipe, bucketKeys(key), l.argv(args...)...)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	l.settle.deliver(ctx, batch, finishes)
	v, err := own.Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") || noLimits(v) {
		return l.run(ctx, s, key, args...)
	}
	if err != nil {
		return nil, err
	}
	return replySlice(v)
}

// runValue executes a bucket script for its effect.
func (l *Limiter) runValue(ctx context.Context, s *redis.Script, key BucketKey, args ...any) error {
	_, err := l.runRaw(ctx, s, key, args...)
	return err
}

// sourceFlag is the last ARGV of every bucket script: "1" asks the script to report a
// bucket without limits (codeNoLimits) instead of treating it as unlimited.
func (l *Limiter) sourceFlag() string {
	if l.opts.Source != nil {
		return "1"
	}
	return "0"
}

func (l *Limiter) seedLimits(ctx context.Context, key BucketKey) error {
	lim, ok, err := l.opts.Source(ctx, key)
	if err != nil {
		return fmt.Errorf("reading limits of %s: %w", key, err)
	}
	if !ok {
		lim = Limits{}
	}
	_, err = l.setLimits(ctx, key, lim, true)
	return err
}

// codeNoLimits is the reply code of a script that found no limits while a source exists.
const codeNoLimits = -3

// luaLimits is the prologue of scripts that need the limits: it ends the script with
// codeNoLimits when the bucket is unconfigured and the caller has a source (last ARGV "1").
const luaLimits = `
local rpm, tpm = limits()
if rpm == nil then
  if ARGV[#ARGV] == '1' then return {-3} end
  rpm, tpm = 0, 0
end
`

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}
