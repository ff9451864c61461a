// Package estimate predicts how many tokens a provider call will use before it is made, so
// the rate limiter can reserve them: prompt tokens by counting (PromptTokens), completion
// tokens by learning from past calls of the same skill on the same model (Estimator).
//
// Completion estimates are deliberately biased high. An underestimate lets more calls
// through than the TPM limit allows and ends in provider 429s; an overestimate only
// delays a call until reconciliation returns the difference.
package estimate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/shared/periodic"
)

// Options configure an Estimator. The zero value is usable.
type Options struct {
	// Alpha is the weight of each new observation in the moving averages. Default 0.3, the
	// value seed 003 found to learn a call type within a few observations.
	Alpha float64
	// K is how many mean deviations above the mean the estimate sits. Default 2: with the
	// mean absolute deviation that covers most of a roughly normal spread (Jacobson's RTO
	// estimator, which this mirrors, uses 4 for a far costlier miss).
	K float64
	// Prior is the estimate for a pair never seen, capped by the request's max_tokens.
	// Default 512.
	Prior int
	// TTL is how long a pair's statistics outlive its last observation. Default 7 days.
	TTL time.Duration
	// CacheTTL is how long a replica reuses statistics read from Redis before reading
	// again. Default 30 s: other replicas' observations arrive within that.
	CacheTTL time.Duration
}

// Stats are one (skill, model) pair's completion-token statistics.
type Stats struct {
	Mean    float64 // moving average of completion tokens
	Dev     float64 // moving average of |observation - mean|
	Samples int
}

// Estimate is the completion-token estimate these statistics give: Mean + k·Dev rounded up,
// the prior when there are no samples, never above maxTokens (when positive) and never
// below 1.
func (s Stats) Estimate(k float64, prior, maxTokens int) int {
	n := prior
	if s.Samples > 0 {
		n = int(math.Ceil(s.Mean + k*s.Dev))
	}
	if maxTokens > 0 && n > maxTokens {
		n = maxTokens
	}
	return max(n, 1)
}

// Estimator learns completion sizes per (skill, model), shared by every router replica
// through Redis. It is safe for concurrent use.
type Estimator struct {
	rdb  redis.UniversalClient
	opts Options

	mu      sync.Mutex
	cache   map[string]cached
	pending map[pair][]int // Defer's observations not yet written
	running bool           // Start's flusher runs
	flusher periodic.Loop
}

type pair struct{ skill, model string }

type cached struct {
	stats Stats
	until time.Time
}

// New returns an Estimator on rdb.
func New(rdb redis.UniversalClient, opts Options) (*Estimator, error) {
	if rdb == nil {
		return nil, errors.New("estimate: rdb is nil")
	}
	if opts.Alpha < 0 || opts.Alpha > 1 {
		return nil, fmt.Errorf("estimate: Options.Alpha %v is outside (0, 1]", opts.Alpha)
	}
	if opts.K < 0 || opts.Prior < 0 || opts.TTL < 0 || opts.CacheTTL < 0 {
		return nil, errors.New("estimate: Options.K, Prior, TTL and CacheTTL must not be negative")
	}
	opts.Alpha = cmp.Or(opts.Alpha, 0.3)
	opts.K = cmp.Or(opts.K, 2)
	opts.Prior = cmp.Or(opts.Prior, 512)
	opts.TTL = cmp.Or(opts.TTL, 7*24*time.Hour)
	opts.CacheTTL = cmp.Or(opts.CacheTTL, 30*time.Second)
	return &Estimator{rdb: rdb, opts: opts, cache: make(map[string]cached)}, nil
}

// Output estimates the completion tokens of a call of skill on model whose request allows
// maxTokens (0: no cap). It always returns a usable estimate: when Redis cannot be read it
// falls back to the last statistics seen, or the prior, and also returns the error.
func (e *Estimator) Output(ctx context.Context, skill, model string, maxTokens int) (int, error) {
	s, err := e.Stats(ctx, skill, model)
	return s.Estimate(e.opts.K, e.opts.Prior, maxTokens), err
}

// Stats returns a pair's statistics, from the local cache while it is fresh.
func (e *Estimator) Stats(ctx context.Context, skill, model string) (Stats, error) {
	key := statsKey(skill, model)
	now := time.Now()
	e.mu.Lock()
	c, ok := e.cache[key]
	e.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.stats, nil
	}
	v, err := e.rdb.HMGet(ctx, key, "mean", "dev", "n").Result()
	if err != nil {
		return c.stats, fmt.Errorf("reading token statistics of %s on %s: %w", skill, model, err)
	}
	s := Stats{Mean: parseFloat(v[0]), Dev: parseFloat(v[1]), Samples: int(parseFloat(v[2]))}
	e.store(key, s, now)
	return s, nil
}

func (e *Estimator) store(key string, s Stats, now time.Time) {
	e.mu.Lock()
	e.cache[key] = cached{stats: s, until: now.Add(e.opts.CacheTTL)}
	e.mu.Unlock()
}

// recordScript folds one observation into a pair's statistics.
//
//	KEYS  [1] statsKey
//	ARGV  [1] alpha [2] TTL ms [3...] observed completion tokens, oldest first
//	reply {mean, dev, samples} as strings
//
// The first observation seeds the deviation at half the mean: one sample says little about
// the spread, and erring high is the cheap direction. The deviation is updated with the
// error against the mean before it moves, as Jacobson's estimator does.
var recordScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'mean', 'dev', 'n')
local a = tonumber(ARGV[1])
local mean, dev, n = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]) or 0
for i = 3, #ARGV do
  local x = tonumber(ARGV[i])
  if not mean or n == 0 then
    mean, dev = x, x / 2
  else
    local d = x - mean
    dev = (1 - a) * dev + a * math.abs(d)
    mean = mean + a * d
  end
  n = n + 1
end
local m, dv = string.format('%.4f', mean), string.format('%.4f', dev)
redis.call('HSET', KEYS[1], 'mean', m, 'dev', dv, 'n', n)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {m, dv, tostring(n)}
`)

// Record adds the completion tokens a provider reported for a call of skill on model.
func (e *Estimator) Record(ctx context.Context, skill, model string, completionTokens int) error {
	if completionTokens < 0 {
		return fmt.Errorf("estimate: completion tokens %d is negative", completionTokens)
	}
	key := statsKey(skill, model)
	v, err := recordScript.Run(ctx, e.rdb, []string{key}, e.recordArgs([]int{completionTokens})...).Slice()
	if err != nil {
		return fmt.Errorf("recording token statistics of %s on %s: %w", skill, model, err)
	}
	e.store(key, statsOf(v), time.Now())
	return nil
}

func (e *Estimator) recordArgs(tokens []int) []any {
	args := make([]any, 0, len(tokens)+2)
	args = append(args, strconv.FormatFloat(e.opts.Alpha, 'f', -1, 64), e.opts.TTL.Milliseconds())
	for _, n := range tokens {
		args = append(args, n)
	}
	return args
}

func statsOf(v []any) Stats {
	return Stats{Mean: parseFloat(v[0]), Dev: parseFloat(v[1]), Samples: int(parseFloat(v[2]))}
}

// Defer is Record off the caller's path: the observation is written, in order with the
// others of its pair, by the next Flush, which Start runs every FlushEvery (one round trip
// for all pairs instead of one per call). Without Start it is Record.
func (e *Estimator) Defer(ctx context.Context, skill, model string, completionTokens int) error {
	if completionTokens < 0 {
		return fmt.Errorf("estimate: completion tokens %d is negative", completionTokens)
	}
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return e.Record(ctx, skill, model, completionTokens)
	}
	if e.pending == nil {
		e.pending = map[pair][]int{}
	}
	k := pair{skill, model}
	e.pending[k] = append(e.pending[k], completionTokens)
	e.mu.Unlock()
	return nil
}

// Flush writes the deferred observations, every pair's in one script run, all in one
// pipeline.
func (e *Estimator) Flush(ctx context.Context) error {
	e.mu.Lock()
	batch := e.pending
	e.pending = nil
	e.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	if err := recordScript.Load(ctx, e.rdb).Err(); err != nil { // EVALSHA in a pipeline cannot fall back to EVAL
		return fmt.Errorf("loading the token statistics script: %w", err)
	}
	pipe := e.rdb.Pipeline()
	cmds := make(map[pair]*redis.Cmd, len(batch))
	for k, tokens := range batch {
		cmds[k] = recordScript.EvalSha(ctx, pipe, []string{statsKey(k.skill, k.model)}, e.recordArgs(tokens)...)
	}
	_, err := pipe.Exec(ctx)
	now := time.Now()
	for k, c := range cmds {
		if v, cerr := c.Slice(); cerr == nil {
			e.store(statsKey(k.skill, k.model), statsOf(v), now)
		}
	}
	if err != nil {
		return fmt.Errorf("recording token statistics of %d pairs: %w", len(batch), err)
	}
	return nil
}

// Start makes Defer buffer, flushed every every (default 100 ms) until Stop.
func (e *Estimator) Start(ctx context.Context, every time.Duration, log *slog.Logger) {
	e.mu.Lock()
	e.running = true
	e.mu.Unlock()
	e.flusher = periodic.Loop{Every: cmp.Or(every, 100*time.Millisecond), Run: func(ctx context.Context) {
		if err := e.Flush(ctx); err != nil {
			log.Warn("flushing token statistics", "error", err)
		}
	}}
	e.flusher.Start(ctx)
}

// Stop ends the flusher and writes what is left; Defer records directly from then on.
func (e *Estimator) Stop(ctx context.Context) error {
	e.mu.Lock()
	e.running = false
	e.mu.Unlock()
	e.flusher.Stop()
	return e.Flush(ctx)
}

func parseFloat(v any) float64 {
	s, _ := v.(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
