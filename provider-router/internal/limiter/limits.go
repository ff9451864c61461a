package limiter

import (
	"context"
	"fmt"
	"time"
)

// setLimitsScript stores a bucket's limits. The balances are first refilled under the old
// limits up to now, so a change applies from this instant and not retroactively; the head
// of the queue is then woken to redo its arithmetic under the new rate. Because every
// script reads the limits from this hash, all replicas follow a change at once.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] rpm [4] tpm [5] "1": only if none are set
//	      [6] source flag (unused)
//	reply 1 stored, 0 left alone (ARGV[5] and limits existed)
var setLimitsScript = bucketScript(`
local now = clock()
local orpm, otpm = limits()
if orpm ~= nil and ARGV[5] == '1' then return 0 end
if orpm == nil then orpm, otpm = 0, 0 end
local nrpm, ntpm = tonumber(ARGV[3]), tonumber(ARGV[4])
save(load(now, orpm, otpm), now, orpm, otpm)
redis.call('HSET', K_LIMITS, 'rpm', ARGV[3], 'tpm', ARGV[4])
save(load(now, nrpm, ntpm), now, nrpm, ntpm)
poke()
return 1
`)

// SetLimits sets a bucket's limits (0: unlimited) for every replica at once. Balances
// above a lowered capacity are cut to it; a raised limit refills faster from now on. A
// limit imposed on a formerly unlimited bucket starts with a full bucket.
func (l *Limiter) SetLimits(ctx context.Context, key BucketKey, limits Limits) error {
	_, err := l.setLimits(ctx, key, limits, false)
	l.dropShare(key, true) // the next share is cut from the new limits
	return err
}

func (l *Limiter) setLimits(ctx context.Context, key BucketKey, limits Limits, onlyIfAbsent bool) (bool, error) {
	if limits.RPM < 0 || limits.TPM < 0 {
		return false, fmt.Errorf("limiter: limits of %s must not be negative (rpm %d, tpm %d)", key, limits.RPM, limits.TPM)
	}
	flag := "0"
	if onlyIfAbsent {
		flag = "1"
	}
	v, err := l.runRaw(ctx, setLimitsScript, key, limits.RPM, limits.TPM, flag)
	if err != nil {
		return false, fmt.Errorf("setting limits of %s: %w", key, err)
	}
	return toInt(v) == 1, nil
}

// State is a bucket's state at one instant, for metrics and operators.
type State struct {
	// Configured is false when the bucket has no limits in Redis (Limits is then zero).
	Configured bool
	Limits     Limits
	// Requests and Tokens are what could be taken now: +Inf when unlimited, negative while
	// an overrun is being paid off.
	Requests float64
	Tokens   float64
	// BlockedFor is what remains of a Penalize.
	BlockedFor time.Duration
	// Queued is the number of calls waiting; Held the number admitted and not released.
	Queued int
	Held   int
	// Outstanding is calls waiting or held per group (run or chain) against this bucket.
	Outstanding map[string]int
}

// stateScript reads a bucket without changing it.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel (unused) [2] now µs or "0" [3] source flag (unused)
//	reply {configured 0|1, rpm, tpm, requests, tokens, blocked µs, queued, held, {group, n, ...}}
var stateScript = bucketScript(`
local now = clock()
local rpm, tpm = limits()
local conf = 1
if rpm == nil then conf, rpm, tpm = 0, 0, 0 end
local b = load(now, rpm, tpm)
local rt, tt = 'inf', 'inf'
if rpm > 0 then rt = fmtf(b.rt) end
if tpm > 0 then tt = fmtf(b.tt) end
local blk = b.blk - now
if blk < 0 then blk = 0 end
return {conf, rpm, tpm, rt, tt, fmt(blk), redis.call('ZCARD', K_Q), redis.call('ZCARD', K_HELD),
        redis.call('HGETALL', K_OUT)}
`)

// State reads a bucket's state.
func (l *Limiter) State(ctx context.Context, key BucketKey) (State, error) {
	v, err := stateScript.Run(ctx, l.rdb, bucketKeys(key), wakeChannel, l.nowArg(), "0").Slice()
	if err != nil {
		return State{}, fmt.Errorf("reading state of %s: %w", key, err)
	}
	s := State{
		Configured: toInt(v[0]) == 1,
		Limits:     Limits{RPM: int(toInt(v[1])), TPM: int(toInt(v[2]))},
		Requests:   toFloat(v[3]),
		Tokens:     toFloat(v[4]),
		BlockedFor: time.Duration(toInt(v[5])) * time.Microsecond,
		Queued:     int(toInt(v[6])),
		Held:       int(toInt(v[7])),
	}
	if kv, ok := v[8].([]any); ok && len(kv) > 0 {
		s.Outstanding = make(map[string]int, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			g, _ := kv[i].(string)
			s.Outstanding[g] = int(toInt(kv[i+1]))
		}
	}
	return s, nil
}
