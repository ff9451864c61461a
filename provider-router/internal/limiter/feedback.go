package limiter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard-ai/switchyard/provider-router/internal/provider"
)

// observeScript lowers balances to what the provider says remains. It never raises them:
// our own accounting already holds reservations the provider has not seen yet, and other
// replicas' calls, so a higher provider figure is stale, not spare capacity.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] remaining requests or "" [4] remaining
//	      tokens or "" [5] source flag
//	reply 1 a balance was lowered, 0 not
var observeScript = bucketScript(luaLimits + `
local now = clock()
local b = load(now, rpm, tpm)
local rr, rt = tonumber(ARGV[3]), tonumber(ARGV[4])
local lowered = 0
if rr and rpm > 0 and rr < b.rt then b.rt = rr; lowered = 1 end
if rt and tpm > 0 and rt < b.tt then b.tt = rt; lowered = 1 end
if lowered == 1 then save(b, now, rpm, tpm) end
return lowered
`)

// Observe feeds a provider's x-ratelimit-* headers back into the bucket: where the
// provider says fewer requests or tokens remain than the bucket holds, the bucket is
// lowered to match (and refills from there at its own rate). A figure is used only when
// the provider also reported the matching limit, since providers that send no headers
// leave the remaining counts at zero. It reports whether the bucket was lowered.
func (l *Limiter) Observe(ctx context.Context, key BucketKey, rl provider.RateLimit) (bool, error) {
	if !rl.Known {
		return false, nil
	}
	rr, rt := "", ""
	if rl.LimitRequests > 0 {
		rr = strconv.Itoa(max(rl.RemainingRequests, 0))
	}
	if rl.LimitTokens > 0 {
		rt = strconv.Itoa(max(rl.RemainingTokens, 0))
	}
	if rr == "" && rt == "" {
		return false, nil
	}
	v, err := l.runRaw(ctx, observeScript, key, rr, rt)
	if err != nil {
		return false, fmt.Errorf("observing rate-limit headers of %s: %w", key, err)
	}
	return toInt(v) == 1, nil
}

// DefaultRetryAfter is the penalty of a 429 that did not say how long to wait.
const DefaultRetryAfter = time.Second

// penalizeScript empties both buckets and holds them empty until retry-after: nothing is
// admitted before then, and refill resumes only from then, so the replicas do not all
// rush back the instant the provider's window reopens. An existing longer penalty stays.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] retry-after µs [4] source flag
//	reply the blocked-until time, µs
var penalizeScript = bucketScript(luaLimits + `
local now = clock()
local b = load(now, rpm, tpm)
local untl = now + tonumber(ARGV[3])
if untl > b.blk then b.blk = untl end
if untl > b.ts then b.ts = untl end
if b.rt > 0 then b.rt = 0 end
if b.tt > 0 then b.tt = 0 end
save(b, now, rpm, tpm)
return fmt(b.blk)
`)

// Penalize records an upstream 429: the bucket admits nothing for retryAfter
// (DefaultRetryAfter if not positive) and then refills from empty.
func (l *Limiter) Penalize(ctx context.Context, key BucketKey, retryAfter time.Duration) error {
	if retryAfter <= 0 {
		retryAfter = DefaultRetryAfter
	}
	l.dropShare(key, false) // the bucket is emptied on purpose: nothing to give back
	if err := l.runValue(ctx, penalizeScript, key, retryAfter.Microseconds()); err != nil {
		return fmt.Errorf("penalizing %s: %w", key, err)
	}
	return nil
}
