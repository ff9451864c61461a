package limiter

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Reservation is an admitted call's hold on its bucket. Reconcile it once the provider
// reported usage and Release it when the call is over, whatever the outcome.
type Reservation struct {
	Key    BucketKey
	Tokens int    // the estimate reserved
	Group  string // as requested ("" stays "")
	// EnqueuedAt and AdmittedAt are Redis server times: comparable across replicas.
	EnqueuedAt time.Time
	AdmittedAt time.Time
	// WokenBy is what woke the call for its last, successful look (WakeNone: no wait).
	WokenBy WakeReason
	// Wakes counts the looks it took.
	Wakes int

	l          *Limiter
	id         string
	share      *share // non-nil: admitted from this replica's share (Allowance), not the bucket
	reconciled atomic.Bool
	released   atomic.Bool
}

// Waited is how long the call queued, measured on the Redis server's clock.
func (r *Reservation) Waited() time.Duration { return r.AdmittedAt.Sub(r.EnqueuedAt) }

// reconcileScript returns tokens reserved but not used, or takes an overrun. A refund wakes
// the head of the queue at once instead of leaving it asleep until its refill timer. An
// overrun may leave the bucket in debt, which later refill pays off: the provider counted
// the tokens, so must we.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] tokens to return (negative: take)
//	      [4] source flag
//	reply tokens available afterwards ('inf' if unlimited)
var reconcileScript = bucketScript(luaLimits + `
if tpm == 0 then return 'inf' end
local now = clock()
local d = tonumber(ARGV[3])
local b = load(now, rpm, tpm)
b.tt = b.tt + d
if b.tt > tpm then b.tt = tpm end
save(b, now, rpm, tpm)
if d > 0 then poke() end
return fmtf(b.tt)
`)

// Reconcile corrects the reservation with the tokens the provider reported (prompt plus
// completion): the unused part of the estimate goes back to the TPM bucket, an overrun is
// taken from it. Only the first call has an effect.
func (r *Reservation) Reconcile(ctx context.Context, actualTokens int) error {
	if !r.reconciled.CompareAndSwap(false, true) {
		return nil
	}
	d := r.Tokens - actualTokens
	if d == 0 || r.share != nil && r.l.refund(r.share, d) {
		return nil
	}
	_, err := r.l.call(ctx, func(ctx context.Context) ([]any, error) {
		err := r.l.runValue(ctx, reconcileScript, r.Key, d)
		return nil, err
	})
	if err != nil {
		return fmt.Errorf("reconciling %s: %w", r.Key, err)
	}
	return nil
}

// releaseScript ends an admitted call: it no longer counts as outstanding for its group,
// which may move that group's waiters forward (woken if one becomes the head). RPM and TPM
// are not returned: the provider counted the request when it started.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] id [4] keep ms [5] source flag
//	reply 1 released, 0 unknown (already released, or expired after HoldTTL)
var releaseScript = bucketScript(`
local h0 = head()
local id = ARGV[3]
local res = 0
if redis.call('ZREM', K_HELD, id) == 1 then
  local _, _, g = parse(redis.call('HGET', K_INFO, id))
  redis.call('HDEL', K_INFO, id)
  if g then add_out(g, -1) end
  res = 1
end
notify(h0, nil)
keep(tonumber(ARGV[4]))
return res
`)

// Release ends the call. It is safe to call more than once; only the first has an effect.
func (r *Reservation) Release(ctx context.Context) error {
	if !r.released.CompareAndSwap(false, true) || r.share != nil {
		return nil // a call admitted from a share holds nothing in the bucket
	}
	_, err := r.l.call(ctx, func(ctx context.Context) ([]any, error) {
		return nil, r.l.runValue(ctx, releaseScript, r.Key, r.id, r.l.keepMillis())
	})
	if err != nil {
		return fmt.Errorf("releasing %s: %w", r.Key, err)
	}
	return nil
}

// finishScript is reconcileScript and releaseScript in one round trip, for the common end
// of a call: the provider answered and reported its usage.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] tokens to return (negative: take) or "0"
//	      [4] id [5] source flag
//	reply 1 released, 0 unknown (already released, or expired after HoldTTL)
var finishScript = bucketScript(luaLimits + `
local h0 = head()
local d = tonumber(ARGV[3])
local refund = false
if tpm > 0 and d ~= 0 then
  local now = clock()
  local b = load(now, rpm, tpm)
  b.tt = b.tt + d
  if b.tt > tpm then b.tt = tpm end
  save(b, now, rpm, tpm)
  refund = d > 0
end
local id = ARGV[4]
local res = 0
if redis.call('ZREM', K_HELD, id) == 1 then
  local _, _, g = parse(redis.call('HGET', K_INFO, id))
  redis.call('HDEL', K_INFO, id)
  if g then add_out(g, -1) end
  res = 1
end
if refund then poke() else notify(h0, nil) end
return res
`)

// Finish is Reconcile(actualTokens) followed by Release, in one script that shares its
// round trip with the finishes of other calls ending within Options.FinishLinger. Like
// Reconcile and Release it has an effect only the first time: after Reconcile it only
// releases, after Release it only reconciles. ctx is not consulted: the finish is sent
// whatever happens to the caller, so a reservation is never left held.
func (r *Reservation) Finish(ctx context.Context, actualTokens int) error {
	if !r.released.CompareAndSwap(false, true) {
		return r.Reconcile(ctx, actualTokens) // released already: at most the correction is left
	}
	d := 0
	if r.reconciled.CompareAndSwap(false, true) {
		d = r.Tokens - actualTokens
	}
	if r.share != nil && (d == 0 || r.l.refund(r.share, d)) {
		return nil // nothing to release; the correction stayed in the open share
	}
	if err := r.l.settle.finish(r, d); err != nil {
		return fmt.Errorf("finishing %s: %w", r.Key, err)
	}
	return nil
}
