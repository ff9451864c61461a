package limiter

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// TransitAllowance is how much later than we send it a call may reach the provider before
// our bucket could let a call through ahead of the provider's: see anchor in luaLib. It
// costs no throughput — the burst is still the whole limit — only the first call after a
// burst waits this much longer. 50 ms covers a fresh connection's dial and the scheduling
// delays of a busy host; measured in docs/rate-limits.md.
const TransitAllowance = 50 * time.Millisecond

var transitAllowanceUS = strconv.FormatInt(TransitAllowance.Microseconds(), 10)

// luaLib is prepended to every bucket script. Every such script takes the eleven keys of
// bucketKeys as KEYS (in the k* order) and starts its ARGV with:
//
//	ARGV[1] the wake channel (PUBLISHed with the id of a waiter that should look again)
//	ARGV[2] now in µs, or "0" to use the Redis server's TIME
//
// Using the server's clock by default means every replica measures refill with the same
// clock however far the replicas' own clocks drift; tests pass a time to make the bucket
// arithmetic exact.
//
// Numbers leave Lua through string.format: Lua 5.1's tostring keeps 14 digits, which would
// round µs timestamps and the 53-bit queue scores.
var luaLib = `
local K_LIMITS, K_STATE, K_Q, K_LEASE, K_HELD, K_INFO, K_GIDX, K_OUT, K_SEQ, K_PARK, K_PEND =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local CHANNEL = ARGV[1]
local TRANSIT_US = ` + transitAllowanceUS + `

local function fmt(n) return string.format('%.0f', n) end
local function fmtf(n) return string.format('%.6f', n) end

local function clock()
  local n = tonumber(ARGV[2])
  if n and n > 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- limits returns rpm, tpm, or nil when the bucket has never been configured.
local function limits()
  local v = redis.call('HMGET', K_LIMITS, 'rpm', 'tpm')
  if not v[1] and not v[2] then return nil end
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0
end

-- load reads the balances and refills them continuously up to now: capacity is the
-- per-minute limit and the rate limit/60 s. A missing balance is a full bucket (new, idle
-- long enough to have expired, or a limit just imposed on an unlimited bucket). ts may lie
-- in the future after a Penalize: no refill happens before it.
local function load(now, rpm, tpm)
  local v = redis.call('HMGET', K_STATE, 'rt', 'tt', 'ts', 'blk')
  local b = {rt = tonumber(v[1]) or rpm, tt = tonumber(v[2]) or tpm,
             ts = tonumber(v[3]) or now, blk = tonumber(v[4]) or 0, now = now}
  local el = now - b.ts
  if el > 0 then
    b.rt = b.rt + el * rpm / 60e6
    b.tt = b.tt + el * tpm / 60e6
    b.ts = now
  end
  if b.rt > rpm then b.rt = rpm end
  if b.tt > tpm then b.tt = tpm end
  return b
end

-- save writes the balances back and lets the state expire exactly when the bucket would
-- have refilled to full anyway (a missing state reads as full), so idle buckets cost nothing.
local function save(b, now, rpm, tpm)
  redis.call('HSET', K_STATE, 'ts', fmt(b.ts), 'blk', fmt(b.blk))
  local full = b.ts - now
  if b.blk - now > full then full = b.blk - now end
  if rpm > 0 then
    redis.call('HSET', K_STATE, 'rt', fmtf(b.rt))
    local f = (b.ts - now) + (rpm - b.rt) * 60e6 / rpm
    if f > full then full = f end
  else
    redis.call('HDEL', K_STATE, 'rt')
  end
  if tpm > 0 then
    redis.call('HSET', K_STATE, 'tt', fmtf(b.tt))
    local f = (b.ts - now) + (tpm - b.tt) * 60e6 / tpm
    if f > full then full = f end
  else
    redis.call('HDEL', K_STATE, 'tt')
  end
  redis.call('PEXPIRE', K_STATE, math.ceil(full / 1000) + 1000)
end

-- need is what the token bucket must hold before a request of n tokens may go: a request
-- larger than the whole bucket waits for a full bucket and then runs it into debt, rather
-- than never running.
local function need(n, tpm)
  if n > tpm then return tpm end
  return n
end

local function fits(b, now, rpm, tpm, n)
  if now < b.blk then return false end
  if rpm > 0 and b.rt < 1 then return false end
  if tpm > 0 and b.tt < need(n, tpm) then return false end
  return true
end

-- wait_us is how long until fits() turns true if nothing else happens: the exact refill
-- time, so a waiter sleeps until the moment its capacity exists instead of polling.
local function wait_us(b, now, rpm, tpm, n)
  local w = b.blk - now
  local from = b.ts - now
  if rpm > 0 and b.rt < 1 then
    local x = from + (1 - b.rt) * 60e6 / rpm
    if x > w then w = x end
  end
  if tpm > 0 and b.tt < need(n, tpm) then
    local x = from + (need(n, tpm) - b.tt) * 60e6 / tpm
    if x > w then w = x end
  end
  if w < 1 then w = 1 end
  return math.ceil(w)
end

-- anchor is called before a full bucket gives anything away. The provider's own bucket
-- starts refilling when our first call *arrives*, up to a transit later than we sent it, and
-- refills on that phase for as long as it stays below full; if ours refilled from the send,
-- a later call that travelled faster than that first one would reach the provider just
-- before its token (a near-miss 429, "try again in 3ms"). So a full bucket that gives starts
-- refilling lag µs after now (TRANSIT_US, more for a share whose calls leave later): the
-- burst stays the whole limit and the rate is untouched; only the phase moves, once per
-- busy period. (A bucket that is not full is refilling on the provider's side too, and
-- taking early is only ever early.)
local function anchor(b, rpm, tpm, lag)
  if (rpm > 0 and b.rt >= rpm) or (tpm > 0 and b.tt >= tpm) then
    if b.ts < b.now + lag then b.ts = b.now + lag end
  end
end

local function take(b, rpm, tpm, n)
  anchor(b, rpm, tpm, TRANSIT_US)
  if rpm > 0 then b.rt = b.rt - 1 end
  if tpm > 0 then b.tt = b.tt - n end
end

-- score orders the queue: priority, then the group's outstanding calls (fewest first: the
-- progress signal), then arrival. 2 + 10 + 41 bits stay exact in a double.
local function score(prio, out, seq)
  if out > 1023 then out = 1023 end
  return (prio * 1024 + out) * 2199023255552 + seq
end

local function parse(info)
  local p, s, g = string.match(info or '', '^(%d+)|(%d+)|(.*)$')
  return tonumber(p), tonumber(s), g
end

-- weight is what orders a group's waiters: its calls outstanding, plus the calls it has
-- said it will make later (Request.Pending; none unless its callers say so).
local function weight(group)
  return (tonumber(redis.call('HGET', K_OUT, group)) or 0) + (tonumber(redis.call('HGET', K_PEND, group)) or 0)
end

-- rescore gives every waiter of group the group's current weight.
local function rescore(group)
  local n = weight(group)
  local ms = redis.call('ZRANGEBYLEX', K_GIDX, '[' .. group .. '\0', '(' .. group .. '\1')
  for _, m in ipairs(ms) do
    local id = string.sub(m, #group + 2)
    local p, s = parse(redis.call('HGET', K_INFO, id))
    if p then redis.call('ZADD', K_Q, 'XX', fmt(score(p, n, s)), id) end
  end
end

local function add_out(group, d)
  local n = redis.call('HINCRBY', K_OUT, group, d)
  if n <= 0 then
    redis.call('HDEL', K_OUT, group)
    redis.call('HDEL', K_PEND, group)
  end
  rescore(group)
end

-- unqueue takes a waiter out of the queue (keeping its info); returns its group or nil.
local function unqueue(id)
  if redis.call('ZREM', K_Q, id) == 0 then return nil end
  redis.call('ZREM', K_LEASE, id)
  local _, _, g = parse(redis.call('HGET', K_INFO, id))
  if g then redis.call('ZREM', K_GIDX, g .. '\0' .. id) end
  return g
end

-- prune drops waiters whose lease ran out and reservations never released (their replica
-- died), a bounded number per call so no script runs long.
local function prune(now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', fmt(now), 'LIMIT', 0, 64)) do
    local g = unqueue(id)
    redis.call('ZREM', K_LEASE, id)
    redis.call('HDEL', K_INFO, id)
    if g then add_out(g, -1) end
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_HELD, '-inf', fmt(now), 'LIMIT', 0, 64)) do
    redis.call('ZREM', K_HELD, id)
    local _, _, g = parse(redis.call('HGET', K_INFO, id))
    redis.call('HDEL', K_INFO, id)
    if g then add_out(g, -1) end
  end
end

local function head()
  return redis.call('ZRANGE', K_Q, 0, 0)[1]
end

-- notify wakes the head if it changed since before (and is not the caller, who knows).
local function notify(before, caller)
  local h = head()
  if h and h ~= before and h ~= caller then redis.call('PUBLISH', CHANNEL, h) end
end

-- poke wakes the head unconditionally: capacity came back, it should look again.
local function poke()
  local h = head()
  if h then redis.call('PUBLISH', CHANNEL, h) end
end

-- keep lets a bucket's bookkeeping vanish once nobody has touched it for ms.
local function keep(ms)
  for _, k in ipairs({K_Q, K_LEASE, K_HELD, K_INFO, K_GIDX, K_OUT, K_SEQ, K_PEND}) do
    redis.call('PEXPIRE', k, ms)
  end
end
`

// bucketScripts are every script bucketScript built, for Start to load.
var bucketScripts []*redis.Script

// bucketScript builds a script from luaLib and a body.
func bucketScript(body string) *redis.Script {
	s := redis.NewScript(luaLib + body)
	bucketScripts = append(bucketScripts, s)
	return s
}

// luaQueue holds the parts shared by the scripts that admit: reply and try_head.
const luaQueue = `
-- reply is every admitting script's answer:
-- {code, wait µs (-1: not the head, wait to be woken), rank in queue (-1: none),
--  requests available ('inf' if unlimited), tokens available, server now µs, queue length,
--  rpm limit, tpm limit (0: unlimited)}
local function reply(code, w, id, b, rpm, tpm, now)
  local rank = redis.call('ZRANK', K_Q, id) or -1
  local rt, tt = 'inf', 'inf'
  if rpm > 0 then rt = fmtf(b.rt) end
  if tpm > 0 then tt = fmtf(b.tt) end
  return {code, fmt(w), rank, rt, tt, fmt(now), redis.call('ZCARD', K_Q), rpm, tpm}
end

-- try_head admits waiter id if it is the head of the queue and its request fits. Only the
-- head may take capacity: a large request at the head is never overtaken by small ones
-- behind it, which would starve it. After an admission the new head is woken, since what
-- is left may fit it too.
local function try_head(id, b, now, rpm, tpm, n, hold)
  if head() ~= id then return 0, -1 end
  if not fits(b, now, rpm, tpm, n) then return 0, wait_us(b, now, rpm, tpm, n) end
  take(b, rpm, tpm, n)
  unqueue(id)
  redis.call('ZADD', K_HELD, fmt(now + hold), id)
  poke()
  return 1, 0
end
`
