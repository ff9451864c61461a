// Package budget refuses provider calls that could break a money or token limit, before
// the provider sees them: hard cost ceilings per run and per chain (spent plus the call's
// worst case must fit), and each organisation's monthly token quota. Running totals live in
// Redis, reserved atomically by Lua scripts so concurrent calls on any number of router
// replicas cannot overspend together, and are seeded from Postgres when Redis has none.
package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scope is what a ceiling applies to.
type Scope string

// The scopes.
const (
	ScopeRun   Scope = "run"
	ScopeChain Scope = "chain"
)

// Ceiling is one hard limit that applies to a call.
type Ceiling struct {
	Scope    Scope
	ID       string
	LimitUSD float64
}

// ExceededError is returned when a call's worst case does not fit under a ceiling.
type ExceededError struct {
	Ceiling   Ceiling
	SpentUSD  float64 // spent plus what calls in flight hold
	WorstCase float64
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("budget: %s %s: spent %.6f + worst case %.6f > ceiling %.6f USD",
		e.Ceiling.Scope, e.Ceiling.ID, e.SpentUSD, e.WorstCase, e.Ceiling.LimitUSD)
}

// QuotaError is returned when a call's tokens do not fit in the organisation's quota.
type QuotaError struct {
	Quota, Used, Tokens int64
	Month               string
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("budget: monthly token quota %d exhausted for %s (used %d, call needs %d)",
		e.Quota, e.Month, e.Used, e.Tokens)
}

// Store reads what Redis lacks from Postgres: spend so far, ceilings and quotas.
type Store interface {
	Spent(ctx context.Context, scope Scope, id string) (float64, error)
	ChainCeiling(ctx context.Context, chainID string) (ceiling float64, ok bool, err error)
	Quota(ctx context.Context, orgID string) (quota int64, ok bool, err error)
	MonthUsage(ctx context.Context, orgID string, month time.Time) (int64, error)
}

// Guard enforces ceilings and quotas. It is safe for concurrent use.
type Guard struct {
	RDB   redis.UniversalClient
	Store Store
	// CacheTTL is how long chain ceilings and quotas are reused; default 5 s (the registry
	// watcher also drops them on change).
	CacheTTL time.Duration
	// Now returns the current time (tests). Default time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedLimit
}

type cachedLimit struct {
	value float64
	ok    bool
	until time.Time
}

const nano = 1e9 // money is counted in nano-USD in Redis: integers, exact to well below a token's price

func toNano(usd float64) int64 { return int64(math.Ceil(usd * nano)) }
func fromNano(n int64) float64 { return float64(n) / nano }
func (g *Guard) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// spendTTL keeps a run's or chain's running total a week after its last call.
const spendTTL = 7 * 24 * time.Hour

// reserveScript reserves a call's worst case under a ceiling.
//
//	KEYS  [1] spendKey
//	ARGV  [1] ceiling nano-USD [2] worst case nano-USD [3] seed nano-USD or "" [4] TTL s
//	reply {-1, 0} the key is new and no seed was given (read Postgres and retry);
//	      {0, spent+held} refused; {1, spent+held after} reserved
var reserveScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[3] == '' then return {-1, 0} end
  redis.call('HSET', KEYS[1], 'spent', ARGV[3], 'held', 0)
end
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0')
local held = tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
local worst = tonumber(ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
if spent + held + worst > tonumber(ARGV[1]) then return {0, spent + held} end
redis.call('HINCRBY', KEYS[1], 'held', worst)
return {1, spent + held + worst}
`)

// settleScript ends a reservation: the worst case is released and the actual cost
// charged. A key that expired meanwhile is left alone (the next call re-seeds it).
//
//	KEYS  [1] spendKey
//	ARGV  [1] worst case nano-USD [2] actual cost nano-USD
//	reply 1 settled, 0 key gone
var settleScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local held = redis.call('HINCRBY', KEYS[1], 'held', -tonumber(ARGV[1]))
if held < 0 then redis.call('HSET', KEYS[1], 'held', 0) end
redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
return 1
`)

// Hold is a call's reservation under its ceilings. Settle it exactly once.
type Hold struct {
	g        *Guard
	ceilings []Ceiling
	worst    int64
	settled  bool
}

// ChainCeiling returns a chain's ceiling (ok=false: none), cached for CacheTTL.
func (g *Guard) ChainCeiling(ctx context.Context, chainID string) (float64, bool, error) {
	return g.cached(ctx, "chain:"+chainID, func() (float64, bool, error) { return g.Store.ChainCeiling(ctx, chainID) })
}

func (g *Guard) cached(ctx context.Context, key string, load func() (float64, bool, error)) (float64, bool, error) {
	now := g.now()
	g.mu.Lock()
	if c, ok := g.cache[key]; ok && now.Before(c.until) {
		g.mu.Unlock()
		return c.value, c.ok, nil
	}
	g.mu.Unlock()
	v, ok, err := load()
	if err != nil {
		return 0, false, err
	}
	ttl := g.CacheTTL
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	g.mu.Lock()
	if g.cache == nil {
		g.cache = map[string]cachedLimit{}
	}
	g.cache[key] = cachedLimit{value: v, ok: ok, until: now.Add(ttl)}
	g.mu.Unlock()
	return v, ok, nil
}

// InvalidateOrg drops an organisation's cached quota ("" drops every cached limit).
func (g *Guard) InvalidateOrg(orgID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if orgID == "" {
		clear(g.cache)
		return
	}
	delete(g.cache, "quota:"+orgID)
}

// Reserve holds worstUSD under every ceiling, or returns *ExceededError naming the first
// that would be broken (and holds nothing). Every ceiling is reserved atomically on its
// own; a refusal by a later one releases the earlier ones.
func (g *Guard) Reserve(ctx context.Context, ceilings []Ceiling, worstUSD float64) (*Hold, error) {
	h := &Hold{g: g, worst: toNano(worstUSD)}
	for _, c := range ceilings {
		if err := g.reserveOne(ctx, c, h.worst); err != nil {
			h.release(ctx)
			return nil, err
		}
		h.ceilings = append(h.ceilings, c)
	}
	return h, nil
}

func (g *Guard) reserveOne(ctx context.Context, c Ceiling, worst int64) error {
	key := spendKey(c.Scope, c.ID)
	seed := ""
	for range 2 {
		v, err := reserveScript.Run(ctx, g.RDB, []string{key}, toNano(c.LimitUSD), worst, seed,
			int64(spendTTL.Seconds())).Int64Slice()
		if err != nil {
			return fmt.Errorf("reserving under the %s ceiling: %w", c.Scope, err)
		}
		switch v[0] {
		case 1:
			return nil
		case 0:
			return &ExceededError{Ceiling: c, SpentUSD: fromNano(v[1]), WorstCase: fromNano(worst)}
		}
		spent, err := g.Store.Spent(ctx, c.Scope, c.ID)
		if err != nil {
			return fmt.Errorf("reading what %s %s spent: %w", c.Scope, c.ID, err)
		}
		seed = strconv.FormatInt(toNano(spent), 10)
	}
	return errors.New("budget: spend key vanished twice while seeding")
}

func (h *Hold) release(ctx context.Context) {
	for _, c := range h.ceilings {
		_ = settleScript.Run(ctx, h.g.RDB, []string{spendKey(c.Scope, c.ID)}, h.worst, 0).Err()
	}
	h.ceilings = nil
}

// Settle releases the worst case and charges the actual cost (0 when the call failed
// before the provider billed anything).
func (h *Hold) Settle(ctx context.Context, actualUSD float64) error {
	if h == nil || h.settled {
		return nil
	}
	h.settled = true
	var errs []error
	for _, c := range h.ceilings {
		if err := settleScript.Run(ctx, h.g.RDB, []string{spendKey(c.Scope, c.ID)}, h.worst, toNano(actualUSD)).Err(); err != nil {
			errs = append(errs, fmt.Errorf("settling the %s ceiling: %w", c.Scope, err))
		}
	}
	return errors.Join(errs...)
}
