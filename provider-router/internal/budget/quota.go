package budget

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// quotaScript reserves tokens against an organisation's monthly quota.
//
//	KEYS  [1] quotaKey
//	ARGV  [1] quota [2] tokens [3] seed (tokens used this month per Postgres) or "" [4] expiry, unix s
//	reply {-1, 0} the key is new and no seed was given; {0, used} refused; {1, used after} reserved
var quotaScript = redis.NewScript(`
local used = redis.call('GET', KEYS[1])
if not used then
  if ARGV[3] == '' then return {-1, 0} end
  used = ARGV[3]
  redis.call('SET', KEYS[1], used)
  redis.call('EXPIREAT', KEYS[1], ARGV[4])
end
used = tonumber(used)
local n = tonumber(ARGV[2])
if used + n > tonumber(ARGV[1]) then return {0, used} end
return {1, redis.call('INCRBY', KEYS[1], n)}
`)

// adjustScript corrects a reservation by delta tokens, if the month's key still exists.
//
//	KEYS  [1] quotaKey
//	ARGV  [1] delta (actual - reserved)
//	reply the new count, or 0 when the key is gone
var adjustScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('INCRBY', KEYS[1], ARGV[1])
`)

// QuotaHold is a call's reservation against its organisation's month. Reconcile it once.
type QuotaHold struct {
	g      *Guard
	key    string
	tokens int64
	done   bool
}

// Quota returns an organisation's monthly token quota (ok=false: unlimited), cached.
func (g *Guard) Quota(ctx context.Context, orgID string) (int64, bool, error) {
	v, ok, err := g.cached(ctx, "quota:"+orgID, func() (float64, bool, error) {
		q, ok, err := g.Store.Quota(ctx, orgID)
		return float64(q), ok, err
	})
	return int64(v), ok, err
}

// ReserveTokens reserves tokens in the organisation's current calendar month (UTC), or
// returns *QuotaError. Without a quota it returns a nil hold and no error.
func (g *Guard) ReserveTokens(ctx context.Context, orgID string, tokens int64) (*QuotaHold, error) {
	quota, ok, err := g.Quota(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("reading the token quota: %w", err)
	}
	if !ok {
		return nil, nil
	}
	now := g.now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	key := quotaKey(orgID, month)
	expiry := month.AddDate(0, 1, 7).Unix()
	seed := ""
	for range 2 {
		v, err := quotaScript.Run(ctx, g.RDB, []string{key}, quota, tokens, seed, expiry).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("reserving quota: %w", err)
		}
		switch v[0] {
		case 1:
			return &QuotaHold{g: g, key: key, tokens: tokens}, nil
		case 0:
			return nil, &QuotaError{Quota: quota, Used: v[1], Tokens: tokens, Month: month.Format("2006-01")}
		}
		used, err := g.Store.MonthUsage(ctx, orgID, month)
		if err != nil {
			return nil, fmt.Errorf("reading the month's usage: %w", err)
		}
		seed = strconv.FormatInt(used, 10)
	}
	return nil, fmt.Errorf("budget: quota key vanished twice while seeding")
}

// Reconcile replaces the reservation with the tokens actually used (0 for a call that
// failed before the provider counted anything). A nil hold does nothing.
func (h *QuotaHold) Reconcile(ctx context.Context, actual int64) error {
	if h == nil || h.done {
		return nil
	}
	h.done = true
	if d := actual - h.tokens; d != 0 {
		if err := adjustScript.Run(ctx, h.g.RDB, []string{h.key}, d).Err(); err != nil {
			return fmt.Errorf("reconciling quota: %w", err)
		}
	}
	return nil
}
