package limiter

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"
)

// The priorities of ARCHITECTURE.md, lowest number first.
const (
	PriorityCritical = 0
	PriorityHigh     = 1
	PriorityNormal   = 2
	PriorityLow      = 3
)

// Request is one provider call asking for admission.
type Request struct {
	Key BucketKey
	// Tokens is the estimate reserved from the TPM bucket: prompt tokens plus the expected
	// output (see package estimate). Reconcile corrects it once the provider answered.
	Tokens int
	// Priority is the job's priority, PriorityCritical..PriorityLow.
	Priority int
	// Group is the run or chain the call belongs to; among waiters of equal priority the
	// group with the fewest calls outstanding goes first. Empty: the call is its own group.
	Group string
	// Pending, when positive, is how many more calls the group will make after this one's
	// stage (a chain's steps not yet dispatched): they count with its outstanding calls in
	// the order, so the group nearest completion goes first. The group's latest report
	// holds until it has no call outstanding. Zero: leave the group's figure as it is.
	Pending int
	// Deadline bounds the wait (as does ctx's deadline, whichever is sooner). Zero: no bound
	// beyond ctx.
	Deadline time.Time
	// MaxWait, when positive, is the longest the caller will hold on in the queue: a caller
	// that would wait longer (the queue ahead says so, or it has waited that long), or whose
	// Deadline cannot be met, is given a time to come back instead (*BusyError, never a
	// *DeadlineError), so that waiting for capacity holds no worker. Zero: wait up to
	// Deadline.
	MaxWait time.Duration
}

func (r Request) validate() error {
	switch {
	case r.Key.Credential == "" || r.Key.Model == "":
		return fmt.Errorf("limiter: Request.Key %q needs a credential and a model", r.Key.String())
	case r.Tokens < 0:
		return fmt.Errorf("limiter: Request.Tokens %d is negative", r.Tokens)
	case r.Priority < PriorityCritical || r.Priority > PriorityLow:
		return fmt.Errorf("limiter: Request.Priority %d is outside 0..3", r.Priority)
	case r.Pending < 0:
		return fmt.Errorf("limiter: Request.Pending %d is negative", r.Pending)
	case r.MaxWait < 0:
		return fmt.Errorf("limiter: Request.MaxWait %s is negative", r.MaxWait)
	}
	return nil
}

// WakeReason says what last woke a waiting Acquire before it was admitted: for metrics,
// and for tests that must tell a prompt wake-up from a lucky timeout.
type WakeReason string

// The wake reasons.
const (
	WakeNone   WakeReason = ""       // admitted without waiting
	WakeRefill WakeReason = "refill" // the timer set for the moment enough capacity refilled
	WakeNotify WakeReason = "notify" // Pub/Sub: became head, capacity returned, limits changed
	WakeLease  WakeReason = "lease"  // the periodic lease renewal (the safety net)
)

// ErrDeadline is matched (errors.Is) by every *DeadlineError.
var ErrDeadline = errors.New("limiter: no capacity before the deadline")

// DeadlineError is returned when a call could not be admitted before its deadline.
type DeadlineError struct {
	Key    BucketKey
	Waited time.Duration
	// Needed is how much longer the call would have had to wait, when known: it is known
	// when the call was at the head of the queue (the refill arithmetic says), and then the
	// error comes at once instead of at the deadline. 0 when other waiters were ahead.
	Needed time.Duration
	// Ahead is how many waiters were ahead of the call when it gave up.
	Ahead int
}

// Error says how much longer the call needed, or how many were ahead of it.
func (e *DeadlineError) Error() string {
	if e.Needed > 0 {
		return fmt.Sprintf("limiter: %s: capacity needs %s more, past the deadline (waited %s)",
			e.Key, e.Needed.Round(time.Millisecond), e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("limiter: %s: %d calls still ahead at the deadline (waited %s)",
		e.Key, e.Ahead, e.Waited.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrDeadline) true.
func (e *DeadlineError) Is(target error) bool { return target == ErrDeadline }

// ErrBusy is matched (errors.Is) by every *BusyError.
var ErrBusy = errors.New("limiter: the wait exceeds the caller's MaxWait")

// BusyError is returned when a call with a MaxWait would wait longer than that for its
// turn. It has left the queue; RetryAfter is when it should come back.
type BusyError struct {
	Key    BucketKey
	Waited time.Duration
	// Ahead is how many waiters were ahead of the call.
	Ahead int
	// RetryAfter is the call's return slot: the queue's expected drain time, spread at the
	// bucket's rate after the slots given to calls that left before it (parkScript), less
	// half the caller's MaxWait so that it is back in the queue before its turn.
	RetryAfter time.Duration
}

// Error says where the call stood and when to come back.
func (e *BusyError) Error() string {
	return fmt.Sprintf("limiter: %s: %d calls ahead; come back in %s (waited %s)",
		e.Key, e.Ahead, e.RetryAfter.Round(time.Millisecond), e.Waited.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Outcomes reported to Metrics.Waited.
const (
	OutcomeAdmitted = "admitted"
	OutcomeBusy     = "busy"  // left the queue with a time to come back (Request.MaxWait)
	OutcomeShare    = "share" // admitted from the replica's share (Allowance), without waiting
	OutcomeDeadline = "deadline"
	OutcomeCanceled = "canceled"
	OutcomeError    = "error"
)

// The reply codes of acquireScript and attemptScript.
const (
	codeAdmitted = 1
	codeWaiting  = 0
	codeLost     = -2 // the waiter's lease had run out and it was pruned
)

// acquireScript enqueues a call or admits it at once.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] id [4] priority [5] group [6] tokens
//	      [7] lease µs [8] hold µs [9] keep ms [10] pending calls of the group (0: leave as is)
//	      [11] "1" if a limit source exists
//	reply {-3} no limits and a source exists (seed them and retry); otherwise reply():
//	      code 1 admitted, 0 queued (wait µs >= 0: head, sleep that long; -1: wait for a wake)
//
// The call counts as outstanding for its group from here until Release (or until it gives
// up waiting), as in seed 003: a run's fan-out calls count whether waiting or running. The
// fast path (admit without queueing) is taken only when nobody waits, so a newcomer never
// overtakes a waiter.
var acquireScript = bucketScript(luaQueue + luaLimits + `
local now = clock()
local h0 = head()
prune(now)
local id, prio, group, n = ARGV[3], tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local hold = tonumber(ARGV[8])
local pend = tonumber(ARGV[10]) or 0
local b = load(now, rpm, tpm)
if pend > 0 then redis.call('HSET', K_PEND, group, pend) end
add_out(group, 1)
local code, w = 0, -1
if head() == nil and fits(b, now, rpm, tpm, n) then
  take(b, rpm, tpm, n)
  redis.call('HSET', K_INFO, id, prio .. '|0|' .. group)
  redis.call('ZADD', K_HELD, fmt(now + hold), id)
  code, w = 1, 0
else
  local seq = redis.call('INCR', K_SEQ)
  local out = weight(group)
  redis.call('HSET', K_INFO, id, prio .. '|' .. seq .. '|' .. group)
  redis.call('ZADD', K_Q, fmt(score(prio, out, seq)), id)
  redis.call('ZADD', K_LEASE, fmt(now + tonumber(ARGV[7])), id)
  redis.call('ZADD', K_GIDX, 0, group .. '\0' .. id)
  code, w = try_head(id, b, now, rpm, tpm, n, hold)
end
if code == 0 then notify(h0, id) end
save(b, now, rpm, tpm)
keep(tonumber(ARGV[9]))
return reply(code, w, id, b, rpm, tpm, now)
`)

// attemptScript is a waiter looking again (woken, timer, or lease renewal): it renews the
// lease, prunes dead waiters and admits the waiter if it is the head and fits.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] id [4] tokens [5] lease µs [6] hold µs
//	      [7] keep ms [8] "1" if a limit source exists
//	reply {-3} as acquireScript; {-2} the waiter was pruned (lease lapsed): enqueue again;
//	      otherwise reply() as acquireScript
var attemptScript = bucketScript(luaQueue + luaLimits + `
local now = clock()
local h0 = head()
prune(now)
local id, n = ARGV[3], tonumber(ARGV[4])
if not redis.call('ZSCORE', K_Q, id) then
  notify(h0, id)
  return {-2}
end
redis.call('ZADD', K_LEASE, fmt(now + tonumber(ARGV[5])), id)
local b = load(now, rpm, tpm)
local code, w = try_head(id, b, now, rpm, tpm, n, tonumber(ARGV[6]))
if code == 0 then notify(h0, id) end
save(b, now, rpm, tpm)
keep(tonumber(ARGV[7]))
return reply(code, w, id, b, rpm, tpm, now)
`)

// cancelScript withdraws a call that gives up (deadline, cancellation, error). If the call
// had in fact been admitted by a script whose reply was lost, the admission is undone and
// its request and tokens returned.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] id [4] tokens [5] keep ms [6] source flag
//	reply 1 withdrawn from the queue, 2 admission undone, 0 not found
var cancelScript = bucketScript(luaLimits + `
local now = clock()
local h0 = head()
local id = ARGV[3]
local res = 0
local g = unqueue(id)
if g then
  res = 1
elseif redis.call('ZREM', K_HELD, id) == 1 then
  local _, _, hg = parse(redis.call('HGET', K_INFO, id))
  g = hg
  res = 2
  local b = load(now, rpm, tpm)
  if rpm > 0 then b.rt = b.rt + 1 end
  if tpm > 0 then b.tt = b.tt + tonumber(ARGV[4]) end
  save(b, now, rpm, tpm)
end
redis.call('HDEL', K_INFO, id)
if g then add_out(g, -1) end
if res == 2 then poke() else notify(h0, nil) end
keep(tonumber(ARGV[5]))
return res
`)

// parkScript gives a call that will not wait for its turn (Request.MaxWait) a time to come
// back. Slots are spread at the bucket's rate: after the calls still queued, and after the
// slot handed to the previous call that left, so calls sent away together do not all
// return together (the kPark key remembers the latest slot).
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] tokens [4] lead µs [5] source flag
//	reply {-3} as acquireScript; otherwise {delay µs}: the slot, less lead, from now (>= 0)
var parkScript = bucketScript(luaLimits + `
local now = clock()
local n, lead = tonumber(ARGV[3]), tonumber(ARGV[4])
local per = 0
if rpm > 0 then per = 60e6 / rpm end
if tpm > 0 then
  local t = need(n, tpm) * 60e6 / tpm
  if t > per then per = t end
end
local slot = now + (redis.call('ZCARD', K_Q) + 1) * per
local last = tonumber(redis.call('GET', K_PARK))
if last and last + per > slot then slot = last + per end
redis.call('SET', K_PARK, fmt(slot), 'PX', math.ceil((slot - now) / 1000) + 60000)
local d = slot - now - lead
if d < 0 then d = 0 end
return {fmt(d)}
`)

// reply is the decoded answer of acquireScript and attemptScript.
type reply struct {
	code     int64
	wait     time.Duration // <0: not the head
	rank     int
	requests float64
	tokens   float64
	now      time.Time
	queued   int
	rpm, tpm int64
}

// perCall is how long the bucket takes to refill one call of n tokens: the pace at which
// its queue drains. 0 when the bucket is unlimited.
func (r reply) perCall(n int) time.Duration {
	var d time.Duration
	if r.rpm > 0 {
		d = time.Minute / time.Duration(r.rpm)
	}
	if r.tpm > 0 {
		d = max(d, time.Duration(min(int64(n), r.tpm)*int64(time.Minute)/r.tpm))
	}
	return d
}

// expectedWait is how long a queued call should still wait: exact at the head, else one
// refill per call ahead of it and one for itself.
func (r reply) expectedWait(n int) time.Duration {
	if r.wait >= 0 {
		return r.wait
	}
	return time.Duration(max(r.rank, 0)+1) * r.perCall(n)
}

func parseReply(v []any) reply {
	r := reply{code: toInt(v[0])}
	if len(v) < 7 {
		return r
	}
	w := toInt(v[1])
	r.wait = -1
	if w >= 0 {
		r.wait = time.Duration(w) * time.Microsecond
	}
	r.rank = int(toInt(v[2]))
	r.requests = toFloat(v[3])
	r.tokens = toFloat(v[4])
	r.now = time.UnixMicro(toInt(v[5]))
	r.queued = int(toInt(v[6]))
	if len(v) >= 9 {
		r.rpm, r.tpm = toInt(v[7]), toInt(v[8])
	}
	return r
}

// scriptTimeout bounds one script call. Script calls are detached from the caller's
// context so a cancellation cannot leave it unknown whether an admission happened.
const scriptTimeout = 5 * time.Second

func (l *Limiter) call(ctx context.Context, fn func(ctx context.Context) ([]any, error)) ([]any, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptTimeout)
	defer cancel()
	return fn(ctx)
}

// Acquire admits one call: it reserves one request and req.Tokens tokens, waiting in the
// bucket's queue if they are not available or others wait already. It returns when the
// call is admitted, when ctx ends (ctx.Err wrapped), or when req.Deadline (or ctx's
// deadline) cannot be met (*DeadlineError; at once if the refill arithmetic already says
// so). The returned Reservation must be Released.
func (l *Limiter) Acquire(ctx context.Context, req Request) (*Reservation, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	if l.opts.Allowance.Requests > 0 {
		if r := l.admitLocally(ctx, req); r != nil {
			return r, nil
		}
	}
	id := rand.Text()
	group := req.Group
	if group == "" {
		group = "~" + id
	}
	deadline := req.Deadline
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	wake := l.register(id)
	defer l.unregister(id)

	enqueue := func(ctx context.Context) ([]any, error) {
		return l.runCarrying(ctx, acquireScript, req.Key, id, req.Priority, group, req.Tokens,
			l.opts.LeaseTTL.Microseconds(), l.opts.HoldTTL.Microseconds(), l.keepMillis(), req.Pending)
	}
	attempt := func(ctx context.Context) ([]any, error) {
		return l.runCarrying(ctx, attemptScript, req.Key, id, req.Tokens,
			l.opts.LeaseTTL.Microseconds(), l.opts.HoldTTL.Microseconds(), l.keepMillis())
	}
	started := time.Now()
	v, err := l.call(ctx, enqueue)
	if err != nil {
		l.opts.Metrics.Waited(req.Key, req.Priority, 0, OutcomeError)
		return nil, fmt.Errorf("acquiring %s: %w", req.Key, err)
	}
	r := parseReply(v)
	enqueuedAt := r.now

	var timer *time.Timer
	var refill <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// The deadline timer and the lease ticker start with the first wait: most calls are
	// admitted by their first look and need neither.
	var expired, renew <-chan time.Time
	var expiry *time.Timer
	var lease *time.Ticker
	defer func() {
		if lease != nil {
			lease.Stop()
		}
		if expiry != nil {
			expiry.Stop()
		}
	}()

	reason, wakes := WakeNone, 0
	// giveUp leaves the queue and returns err, joined with any failure to leave it (the
	// lease then cleans up after us).
	giveUp := func(outcome string, err error) (*Reservation, error) {
		_, cerr := l.call(ctx, func(ctx context.Context) ([]any, error) {
			return nil, l.runValue(ctx, cancelScript, req.Key, id, req.Tokens, l.keepMillis())
		})
		l.opts.Metrics.Waited(req.Key, req.Priority, time.Since(started), outcome)
		if cerr != nil {
			return nil, errors.Join(err, fmt.Errorf("leaving the queue of %s: %w", req.Key, cerr))
		}
		return nil, err
	}
	// A caller with a MaxWait can come back later, so whatever ends its wait — its MaxWait,
	// or a deadline it cannot meet here (its attempt's, typically: a later attempt has a
	// fresh one) — gives it a time to come back (park) rather than a DeadlineError. Its own
	// hard limits are its business when it parks.
	parkable := req.MaxWait > 0
	giveUpAt := func() time.Time {
		if parkable && (deadline.IsZero() || started.Add(req.MaxWait).Before(deadline)) {
			return started.Add(req.MaxWait)
		}
		return deadline
	}
	// park leaves the queue and asks for a return slot (parkScript).
	park := func(r reply) (*Reservation, error) {
		_, err := giveUp(OutcomeBusy, nil)
		if err != nil {
			return nil, err
		}
		v, err := l.call(ctx, func(ctx context.Context) ([]any, error) {
			return l.run(ctx, parkScript, req.Key, req.Tokens, (req.MaxWait / 2).Microseconds())
		})
		if err != nil {
			return nil, fmt.Errorf("asking %s for a return slot: %w", req.Key, err)
		}
		return nil, &BusyError{Key: req.Key, Waited: time.Since(started), Ahead: max(r.rank, 0),
			RetryAfter: time.Duration(toInt(v[0])) * time.Microsecond}
	}
	for {
		l.opts.Metrics.Headroom(req.Key, r.requests, r.tokens, r.queued)
		switch r.code {
		case codeAdmitted:
			waited := r.now.Sub(enqueuedAt)
			l.opts.Metrics.Waited(req.Key, req.Priority, waited, OutcomeAdmitted)
			return &Reservation{
				Key: req.Key, Tokens: req.Tokens, Group: req.Group,
				EnqueuedAt: enqueuedAt, AdmittedAt: r.now, WokenBy: reason, Wakes: wakes,
				l: l, id: id,
			}, nil
		case codeLost:
			// Our lease lapsed (a stall longer than LeaseTTL) and another replica pruned us:
			// take a new place at the back rather than fail the call.
			v, err = l.call(ctx, enqueue)
			if err != nil {
				return giveUp(OutcomeError, fmt.Errorf("acquiring %s: %w", req.Key, err))
			}
			r = parseReply(v)
			continue
		case codeWaiting:
			if wakes == 0 && l.opts.Allowance.Requests > 0 {
				// Calls wait now: this replica's share, if it holds one, goes back at once
				// rather than let later calls overtake the queue until it expires.
				l.dropShare(req.Key, true)
			}
		default:
			return giveUp(OutcomeError, fmt.Errorf("acquiring %s: unexpected reply %v", req.Key, v))
		}
		refill = nil
		if r.wait >= 0 {
			if !deadline.IsZero() && time.Now().Add(r.wait).After(deadline) {
				// The head's refill time is exact unless capacity comes back early; failing
				// now beats holding the queue's head until the deadline.
				if parkable {
					return park(r)
				}
				return giveUp(OutcomeDeadline, &DeadlineError{Key: req.Key, Waited: time.Since(started), Needed: r.wait})
			}
			if timer == nil {
				timer = time.NewTimer(r.wait)
			} else {
				timer.Reset(r.wait)
			}
			refill = timer.C
		}
		if req.MaxWait > 0 && time.Since(started)+r.expectedWait(req.Tokens) > req.MaxWait {
			return park(r)
		}
		if lease == nil {
			lease = time.NewTicker(l.opts.LeaseTTL / 3)
			renew = lease.C
			if until := giveUpAt(); !until.IsZero() {
				expiry = time.NewTimer(time.Until(until))
				expired = expiry.C
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && !deadline.IsZero() {
				if parkable {
					return park(r)
				}
				return giveUp(OutcomeDeadline, &DeadlineError{Key: req.Key, Waited: time.Since(started), Ahead: max(r.rank, 0)})
			}
			return giveUp(OutcomeCanceled, fmt.Errorf("acquiring %s: %w", req.Key, ctx.Err()))
		case <-expired:
			if parkable {
				return park(r)
			}
			return giveUp(OutcomeDeadline, &DeadlineError{Key: req.Key, Waited: time.Since(started), Ahead: max(r.rank, 0)})
		case <-wake:
			reason = WakeNotify
		case <-refill:
			reason = WakeRefill
		case <-renew:
			reason = WakeLease
		}
		wakes++
		v, err = l.call(ctx, attempt)
		if err != nil {
			return giveUp(OutcomeError, fmt.Errorf("acquiring %s: %w", req.Key, err))
		}
		r = parseReply(v)
	}
}
