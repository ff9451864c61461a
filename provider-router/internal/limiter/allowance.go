package limiter

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"
)

// Allowance configures local admission: while a bucket has plenty of headroom and nobody
// waits in its queue, a replica takes a small share of it in one script and admits calls
// from that share without a round trip to Redis. The share comes out of the shared bucket
// up front, so the replicas together never admit more than the limit; what is left when it
// expires goes back. Near the limit, or as soon as a call waits, no share is granted and
// every call takes the shared queue in its priority order, exactly as without allowances.
//
// What a share trades: the calls admitted from it are not counted as outstanding for their
// group (the progress signal orders only waiters, and there are none while shares are
// granted), a limit lowered at runtime or a provider's 429 seen by another replica reaches
// this replica's share only when it expires (TTL), and a replica that dies loses its
// share's remainder until the bucket refills.
type Allowance struct {
	// Requests is the most requests one share holds; 0 (the default) turns local admission
	// off.
	Requests int
	// Share bounds one share to this fraction of each limit (RPM and TPM). Default 0.01.
	Share float64
	// Headroom is the fraction of each limit the bucket must still hold after a share is
	// taken from it. Default 0.5.
	Headroom float64
	// TTL is how long a share lives; its remainder then goes back to the bucket. Default
	// 200 ms.
	TTL time.Duration
}

func (a Allowance) withDefaults() (Allowance, error) {
	if a.Requests < 0 || a.Share < 0 || a.Share > 1 || a.Headroom < 0 || a.Headroom > 1 || a.TTL < 0 {
		return a, fmt.Errorf("limiter: Options.Allowance %+v: Requests, TTL must not be negative, Share and Headroom in 0..1", a)
	}
	a.Share = cmp.Or(a.Share, 0.01)
	a.Headroom = cmp.Or(a.Headroom, 0.5)
	a.TTL = cmp.Or(a.TTL, 200*time.Millisecond)
	return a, nil
}

// allowanceScript gives back what is left of a replica's share and, when asked and the
// bucket can spare it, takes a new one.
//
//	KEYS  the keys of bucketKeys
//	ARGV  [1] wake channel [2] now µs or "0" [3] requests given back [4] tokens given back
//	      (negative: owed) [5] requests wanted (0: only give back) [6] share [7] headroom
//	      [8] the share's TTL in µs [9] source flag
//	reply {-3} as acquireScript; otherwise {requests granted, tokens granted, requests
//	      available, tokens available}: 0 requests granted is no share, -1 unlimited;
//	      available afterwards as in acquireScript's reply ('inf' if unlimited)
var allowanceScript = bucketScript(luaLimits + `
local now = clock()
prune(now)
local b = load(now, rpm, tpm)
local rr, rt = tonumber(ARGV[3]), tonumber(ARGV[4])
if rpm > 0 then b.rt = math.min(b.rt + rr, rpm) end
if tpm > 0 then b.tt = math.min(b.tt + rt, tpm) end
local want, share, room = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local gr, gt = 0, 0
if want > 0 and head() == nil and now >= b.blk then
  gr, gt = want, -1
  if rpm > 0 then
    gr = math.min(want, math.floor(rpm * share))
    if b.rt - gr < rpm * room then gr = 0 end
  end
  if tpm > 0 and gr > 0 then
    gt = math.floor(tpm * share)
    if gt < 1 or b.tt - gt < tpm * room then gr = 0 end
  end
  if gr > 0 then
    -- a call admitted from the share may leave up to its TTL after the grant
    anchor(b, rpm, tpm, TRANSIT_US + tonumber(ARGV[8]))
    if rpm > 0 then b.rt = b.rt - gr end
    if tpm > 0 then b.tt = b.tt - gt end
  else
    gt = 0
  end
end
save(b, now, rpm, tpm)
if rr > 0 or rt > 0 then poke() end
local ra, ta = 'inf', 'inf'
if rpm > 0 then ra = fmtf(b.rt) end
if tpm > 0 then ta = fmtf(b.tt) end
return {gr, gt, ra, ta}
`)

// share is one granted share. Its counters are guarded by shares.mu.
type share struct {
	key               BucketKey
	requests, tokens  int // left
	grantedRequests   int
	grantedTokens     int
	unlimitedRequests bool
	unlimitedTokens   bool
	expires           time.Time
	open              bool
	expiry            *time.Timer
}

// take admits one call of n tokens from the share, if it holds enough.
func (s *share) take(n int, now time.Time) bool {
	if !s.open || !now.Before(s.expires) ||
		(!s.unlimitedRequests && s.requests < 1) || (!s.unlimitedTokens && s.tokens < n) {
		return false
	}
	if !s.unlimitedRequests {
		s.requests--
	}
	if !s.unlimitedTokens {
		s.tokens -= n
	}
	return true
}

// useful reports whether the share is still worth keeping: open, in time, with requests
// and at least half its tokens left.
func (s *share) useful(now time.Time) bool {
	return s != nil && s.open && now.Before(s.expires) && (s.unlimitedRequests || s.requests > 0) &&
		(s.unlimitedTokens || 2*s.tokens >= s.grantedTokens)
}

// low reports whether the share is nearly spent or nearly expired: time to fetch the next.
func (s *share) low(now time.Time, ttl time.Duration) bool {
	return 4*s.expires.Sub(now) < ttl || (!s.unlimitedRequests && 4*s.requests < s.grantedRequests) ||
		(!s.unlimitedTokens && 4*s.tokens < s.grantedTokens)
}

// close ends the share and returns what is left to give back.
func (s *share) close() (requests, tokens int) {
	if !s.open {
		return 0, 0
	}
	s.open = false
	if s.expiry != nil {
		s.expiry.Stop()
	}
	if !s.unlimitedRequests {
		requests = s.requests
	}
	if !s.unlimitedTokens {
		tokens = s.tokens
	}
	s.requests, s.tokens = 0, 0
	return requests, tokens
}

// shareSlot is a bucket's current share on this replica.
type shareSlot struct {
	cur      *share
	fetching bool      // one caller asks Redis for the next share; the others go the shared way
	refused  time.Time // no share was granted: do not ask again before then
	// epoch counts the drops (Penalize, SetLimits): a share fetched across one was cut
	// from the bucket as it was before, and goes straight back.
	epoch int
}

// shares are the replica's shares, per bucket.
type shares struct {
	mu    sync.Mutex
	slots map[BucketKey]*shareSlot
}

func (ss *shares) slot(k BucketKey) *shareSlot {
	if ss.slots == nil {
		ss.slots = map[BucketKey]*shareSlot{}
	}
	s := ss.slots[k]
	if s == nil {
		s = &shareSlot{}
		ss.slots[k] = s
	}
	return s
}

// admitLocally admits req from the replica's share of its bucket, taking a new share when
// the last one ran out or expired and the bucket can spare one. nil: go the shared way.
func (l *Limiter) admitLocally(ctx context.Context, req Request) *Reservation {
	now := time.Now()
	ss := &l.shares
	ss.mu.Lock()
	slot := ss.slot(req.Key)
	if slot.cur != nil && slot.cur.take(req.Tokens, now) {
		sh := slot.cur
		if !slot.fetching && sh.low(now, l.opts.Allowance.TTL) {
			// Fetch the next share before this one runs out, off every call's path.
			slot.fetching = true
			go l.renewShare(req.Key, slot.epoch)
		}
		ss.mu.Unlock()
		return l.localReservation(req, sh, now)
	}
	if slot.fetching || now.Before(slot.refused) || slot.cur.useful(now) {
		// Another caller fetches, the bucket refused lately, or the share is still good
		// for smaller calls: this one goes the shared way.
		ss.mu.Unlock()
		return nil
	}
	slot.fetching = true
	epoch := slot.epoch
	var backR, backT int
	if slot.cur != nil {
		backR, backT = slot.cur.close()
		slot.cur = nil
	}
	ss.mu.Unlock()

	sh, err := l.fetchShare(ctx, req.Key, backR, backT, l.opts.Allowance.Requests)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	slot.fetching = false
	if sh != nil && slot.epoch != epoch {
		r, t := sh.close()
		go l.giveBack(req.Key, r, t)
		return nil
	}
	if err != nil || sh == nil {
		if err != nil {
			l.log.Warn("taking a share of a bucket", "bucket", req.Key.String(), "error", err)
		}
		slot.refused = time.Now().Add(l.opts.Allowance.TTL)
		return nil
	}
	l.install(slot, sh)
	if !sh.take(req.Tokens, time.Now()) {
		return nil // a call larger than a whole share: the shared way
	}
	return l.localReservation(req, sh, now)
}

func (l *Limiter) localReservation(req Request, sh *share, now time.Time) *Reservation {
	l.opts.Metrics.Waited(req.Key, req.Priority, 0, OutcomeShare)
	return &Reservation{Key: req.Key, Tokens: req.Tokens, Group: req.Group,
		EnqueuedAt: now, AdmittedAt: now, l: l, share: sh}
}

// fetchShare gives back a closed share's remainder and, when want > 0, asks for a new
// share: nil when the bucket cannot spare one.
func (l *Limiter) fetchShare(ctx context.Context, key BucketKey, backR, backT, want int) (*share, error) {
	a := l.opts.Allowance
	v, err := l.call(ctx, func(ctx context.Context) ([]any, error) {
		return l.run(ctx, allowanceScript, key, backR, backT, want, a.Share, a.Headroom, a.TTL.Microseconds())
	})
	if err != nil {
		return nil, fmt.Errorf("sharing %s: %w", key, err)
	}
	if len(v) < 4 {
		return nil, fmt.Errorf("sharing %s: unexpected reply %v", key, v)
	}
	// While calls are admitted from shares, this is what keeps the headroom gauge current.
	l.opts.Metrics.Headroom(key, toFloat(v[2]), toFloat(v[3]), 0)
	if toInt(v[0]) == 0 {
		return nil, nil
	}
	r, t := toInt(v[0]), toInt(v[1])
	return &share{key: key, requests: int(max(r, 0)), tokens: int(max(t, 0)),
		grantedRequests: int(max(r, 0)), grantedTokens: int(max(t, 0)),
		unlimitedRequests: r < 0, unlimitedTokens: t < 0, open: true,
		expires: time.Now().Add(a.TTL)}, nil
}

// renewShare fetches key's next share in the background and puts it in place of the
// current one, whose remainder then goes back.
func (l *Limiter) renewShare(key BucketKey, epoch int) {
	sh, err := l.fetchShare(context.Background(), key, 0, 0, l.opts.Allowance.Requests)
	if err != nil {
		l.log.Warn("taking a share of a bucket", "bucket", key.String(), "error", err)
	}
	l.shares.mu.Lock()
	slot := l.shares.slot(key)
	slot.fetching = false
	var r, t int
	switch {
	case sh != nil && slot.epoch != epoch:
		r, t = sh.close() // cut before a drop: straight back
	case sh == nil:
		// Refused (or failed): the current share serves until it runs out; then calls
		// go the shared way without asking again for a while.
		slot.refused = time.Now().Add(l.opts.Allowance.TTL)
	default:
		if slot.cur != nil {
			r, t = slot.cur.close()
		}
		l.install(slot, sh)
	}
	l.shares.mu.Unlock()
	l.giveBack(key, r, t)
}

// install makes sh the slot's current share until it expires. Call with shares.mu held.
func (l *Limiter) install(slot *shareSlot, sh *share) {
	slot.cur = sh
	sh.expiry = time.AfterFunc(time.Until(sh.expires), func() { l.expireShare(sh) })
}

// expireShare ends a share whose time ran out and gives its remainder back.
func (l *Limiter) expireShare(sh *share) {
	l.shares.mu.Lock()
	r, t := sh.close()
	if slot := l.shares.slots[sh.key]; slot != nil && slot.cur == sh {
		slot.cur = nil
	}
	l.shares.mu.Unlock()
	l.giveBack(sh.key, r, t)
}

func (l *Limiter) giveBack(key BucketKey, requests, tokens int) {
	if requests == 0 && tokens == 0 {
		return
	}
	if _, err := l.fetchShare(context.Background(), key, requests, tokens, 0); err != nil {
		l.log.Warn("giving back a share of a bucket", "bucket", key.String(), "error", err)
	}
}

// dropShare ends key's share on this replica; keep says whether its remainder goes back
// (false after a provider's 429: the bucket was emptied on purpose).
func (l *Limiter) dropShare(key BucketKey, keep bool) {
	l.shares.mu.Lock()
	var r, t int
	if slot := l.shares.slots[key]; slot != nil {
		slot.epoch++
		if slot.cur != nil {
			r, t = slot.cur.close()
			slot.cur = nil
		}
	}
	l.shares.mu.Unlock()
	if keep {
		l.giveBack(key, r, t)
	}
}

// dropShares gives back every share (Stop).
func (l *Limiter) dropShares() {
	l.shares.mu.Lock()
	keys := make([]BucketKey, 0, len(l.shares.slots))
	for k := range l.shares.slots {
		keys = append(keys, k)
	}
	l.shares.mu.Unlock()
	for _, k := range keys {
		l.dropShare(k, true)
	}
}

// refund corrects a locally admitted call's tokens in its share while the share is open:
// true when done, false when the correction must go to the bucket itself.
func (l *Limiter) refund(sh *share, d int) bool {
	l.shares.mu.Lock()
	defer l.shares.mu.Unlock()
	if !sh.open {
		return false
	}
	if !sh.unlimitedTokens {
		sh.tokens += d
	}
	return true
}
