// Package ratelimit enforces the dispatcher's per-organisation and per-user dispatch rate
// limits, shared by every dispatcher replica through Redis.
//
// # Algorithm
//
// Each limit is a sliding-window counter: the count of the current fixed window plus the
// count of the previous one weighted by how much of it still overlaps the sliding window,
//
//	estimate = previous × (window − elapsed) / window + current
//
// A request is allowed when estimate + cost ≤ limit. This is the approximation Cloudflare
// and others run at scale, chosen over an exact sliding log (a sorted set with one member
// per request) because an organisation may allow 100 000 requests a minute: a log would
// hold up to 100 000 members (several MB) per busy key and cost O(log n) per check plus
// trimming, while the counter is one small hash (three integers) per key and O(1).
//
// Accuracy: the estimate assumes the previous window's requests were spread evenly. It is
// exact whenever the previous window is empty (so a burst from idle is cut at exactly the
// limit), never lets more than limit requests through within one fixed window, and in the
// worst case (the whole previous window's traffic bunched at its end) can admit up to
// 2 × limit in a sliding interval just over one window long, or refuse early when traffic
// was bunched at the start. On realistic traffic the error is a fraction of a percent.
//
// Both limits are checked and updated by one Lua script, so a check is one round trip,
// atomic across replicas, and a refused request consumes neither window. Redis Cluster is
// supported: both keys carry the organisation as hash tag.
//
// # Clock
//
// By default the script reads the Redis server's clock (TIME), so replicas with skewed
// clocks still agree on window boundaries. Request.Now overrides it for tests and replays;
// do not mix the two for the same keys in production.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scope names which limit a Decision is about.
type Scope string

// Scopes.
const (
	ScopeOrg  Scope = "org"
	ScopeUser Scope = "user"
)

// Errors returned by Allow, besides Redis errors.
var (
	// ErrInvalidRequest wraps every validation failure of a Request.
	ErrInvalidRequest = errors.New("invalid rate-limit request")
	// ErrCostExceedsLimit means the request costs more than the limit allows in a whole
	// window, so no amount of waiting would let it through (a batch larger than the limit).
	ErrCostExceedsLimit = errors.New("request cost exceeds the rate limit")
)

// Limiter checks dispatch rate limits. It is safe for concurrent use and holds no state of
// its own: every replica may have one.
type Limiter struct {
	rdb redis.UniversalClient
}

// New returns a Limiter on rdb (a client, a failover client or a cluster client).
func New(rdb redis.UniversalClient) *Limiter {
	return &Limiter{rdb: rdb}
}

// Request is one dispatch to admit.
type Request struct {
	// OrgID identifies the organisation; required when either limit is set.
	OrgID string
	// UserID identifies the user within the organisation. Empty means the request is only
	// subject to the organisation's limit (API keys without a user).
	UserID string
	// OrgLimit is how many requests the organisation may make per Window; 0 means unlimited.
	OrgLimit int
	// UserLimit is how many requests one user may make per Window; 0 means unlimited.
	UserLimit int
	// Window is the sliding window both limits apply to, at millisecond precision; at least
	// 1 ms when a limit is set.
	Window time.Duration
	// Cost is how many requests this one counts as (a batch of n jobs costs n); 0 means 1.
	Cost int
	// Now, when set, replaces the Redis server clock (tests, replays).
	Now time.Time
}

// Decision is the answer to a Request.
type Decision struct {
	// Allowed reports whether the request was admitted and counted.
	Allowed bool
	// Scope is the limit that refused the request (the one with the longer wait when both
	// did) or, when allowed, the limit with the least room left. Empty when no limit is set.
	Scope Scope
	// Count is the sliding-window estimate for Scope: before this request when refused,
	// including it when allowed.
	Count int
	// Limit is Scope's limit.
	Limit int
	// Window is the request's window.
	Window time.Duration
	// ResetAt is when a request of the same cost would be admitted, if nothing else is
	// admitted meanwhile. Zero when allowed.
	ResetAt time.Time
	// RetryAfter is ResetAt minus the clock the check ran on. Zero when allowed.
	RetryAfter time.Duration
}

// allowScript checks and updates the organisation's and the user's sliding-window counters
// atomically. Each key is a hash {w: fixed-window index, c: count in window w, p: count in
// window w−1}; a limit of 0 leaves its key untouched. Nothing is written when the request is
// refused.
//
//	KEYS[1]  organisation counter (orgKey)
//	KEYS[2]  user counter (userKey); always passed so Redis Cluster sees both keys
//	ARGV[1]  now in ms since the epoch, or 0 to read the server clock (TIME)
//	ARGV[2]  window in ms
//	ARGV[3]  organisation limit, 0 = unlimited
//	ARGV[4]  user limit, 0 = unlimited
//	ARGV[5]  cost
//
// Returns {allowed 1|0, scope 0 none|1 org|2 user, count, limit, retry_after_ms, now_ms}.
var allowScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[5])
local idx = math.floor(now / window)
local elapsed = now - idx * window

local function load(key, limit, scope)
  local s = {key = key, limit = limit, scope = scope, w = idx, c = 0, p = 0}
  local v = redis.call('HMGET', key, 'w', 'c', 'p')
  local w = tonumber(v[1])
  if w == idx then
    s.c, s.p = tonumber(v[2]) or 0, tonumber(v[3]) or 0
  elseif w == idx - 1 then
    s.p = tonumber(v[2]) or 0
  elseif w ~= nil and w > idx then
    -- Written by a clock ahead of ours: count against that window rather than forget it.
    s.w, s.c, s.p = w, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  end
  s.est = s.p * (window - elapsed) / window + s.c
  return s
end

-- retry_after returns the ms until estimate + cost <= limit with no further traffic: first
-- within the current window as the previous window's weight decays, else in the next one,
-- where the current count becomes the decaying previous count.
local function retry_after(s)
  local left = window - elapsed
  local room = s.limit - cost - s.c
  if room >= 0 and s.p > 0 then
    local t = math.ceil(left - room * window / s.p)
    if t < left then
      return math.max(t, 0)
    end
  end
  local room_next = s.limit - cost
  if s.c <= room_next then
    return left
  end
  return left + math.ceil(window - room_next * window / s.c)
end

local checks = {}
if tonumber(ARGV[3]) > 0 then
  checks[#checks + 1] = load(KEYS[1], tonumber(ARGV[3]), 1)
end
if tonumber(ARGV[4]) > 0 then
  checks[#checks + 1] = load(KEYS[2], tonumber(ARGV[4]), 2)
end

local refused, wait = nil, -1
for _, s in ipairs(checks) do
  if s.est + cost > s.limit then
    local r = retry_after(s)
    if r > wait then
      refused, wait = s, r
    end
  end
end
if refused then
  return {0, refused.scope, math.floor(refused.est), refused.limit, wait, now}
end

local tightest, tightest_room = nil, nil
for _, s in ipairs(checks) do
  redis.call('HSET', s.key, 'w', s.w, 'c', s.c + cost, 'p', s.p)
  -- Live until window w+1 ends, where this window still counts as the previous one.
  redis.call('PEXPIRE', s.key, 2 * window - elapsed)
  local room = s.limit - (s.est + cost)
  if tightest == nil or room < tightest_room then
    tightest, tightest_room = s, room
  end
end
if tightest == nil then
  return {1, 0, 0, 0, 0, now}
end
return {1, tightest.scope, math.floor(tightest.est + cost), tightest.limit, 0, now}
`)

// Allow checks req against both limits and, if both have room, counts it in both.
func (l *Limiter) Allow(ctx context.Context, req Request) (Decision, error) {
	cost := max(req.Cost, 1)
	d := Decision{Allowed: true, Window: req.Window}
	if err := validate(req, cost); err != nil {
		return d, err
	}
	userLimit := req.UserLimit
	if req.UserID == "" {
		userLimit = 0
	}
	if req.OrgLimit == 0 && userLimit == 0 {
		return d, nil // nothing to enforce: no round trip
	}
	var nowMS int64
	if !req.Now.IsZero() {
		nowMS = max(req.Now.UnixMilli(), 1) // 0 would mean "server clock"
	}
	keys := []string{orgKey(req.OrgID, req.Window), userKey(req.OrgID, req.UserID, req.Window)}
	res, err := allowScript.Run(ctx, l.rdb, keys,
		nowMS, req.Window.Milliseconds(), req.OrgLimit, userLimit, cost).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("checking rate limit of org %q: %w", req.OrgID, err)
	}
	if len(res) != 6 {
		return Decision{}, fmt.Errorf("checking rate limit of org %q: script returned %d values", req.OrgID, len(res))
	}
	d.Allowed = res[0] == 1
	switch res[1] {
	case 1:
		d.Scope = ScopeOrg
	case 2:
		d.Scope = ScopeUser
	}
	d.Count, d.Limit = int(res[2]), int(res[3])
	if !d.Allowed {
		d.RetryAfter = time.Duration(res[4]) * time.Millisecond
		d.ResetAt = time.UnixMilli(res[5]).Add(d.RetryAfter)
	}
	return d, nil
}

func validate(req Request, cost int) error {
	switch {
	case req.OrgLimit < 0:
		return fmt.Errorf("%w: OrgLimit is negative", ErrInvalidRequest)
	case req.UserLimit < 0:
		return fmt.Errorf("%w: UserLimit is negative", ErrInvalidRequest)
	case req.Cost < 0:
		return fmt.Errorf("%w: Cost is negative", ErrInvalidRequest)
	case req.OrgLimit == 0 && req.UserLimit == 0:
		return nil
	case req.OrgID == "":
		return fmt.Errorf("%w: OrgID is empty", ErrInvalidRequest)
	case req.Window < time.Millisecond:
		return fmt.Errorf("%w: Window %s is under 1ms", ErrInvalidRequest, req.Window)
	case req.OrgLimit > 0 && cost > req.OrgLimit:
		return fmt.Errorf("%w: cost %d, org limit %d", ErrCostExceedsLimit, cost, req.OrgLimit)
	case req.UserID != "" && req.UserLimit > 0 && cost > req.UserLimit:
		return fmt.Errorf("%w: cost %d, user limit %d", ErrCostExceedsLimit, cost, req.UserLimit)
	}
	return nil
}
