package ledger

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type bundle struct {
	t      *testing.T
	dbURL  string
	pool   *pgxpool.Pool
	rdbURL string
	rdb    *redis.Client
	orgID  string
	m      *recorder
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dbURL, pool := testkit.DB(t)
	rdbURL, rdb := testkit.Redis(t)
	return &bundle{t: t, dbURL: dbURL, pool: pool, rdbURL: rdbURL, rdb: rdb, orgID: testkit.NewOrg(t, pool), m: &recorder{}}
}

// writer starts a Writer on db and rdb (the bundle's unless given), stopped at cleanup.
func (b *bundle) writer(db *pgxpool.Pool, rdb *redis.Client, opts Options) *Writer {
	b.t.Helper()
	opts.Linger = 5 * time.Millisecond
	opts.MaxBackoff = 200 * time.Millisecond
	opts.Metrics = b.m
	w := New(db, rdb, slog.New(slog.DiscardHandler), opts)
	require.NoError(b.t, w.Start(context.Background()))
	b.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w
}

// proxied returns a pool and a Redis client that reach the bundle's stores through proxies.
func (b *bundle) proxied() (*pgxpool.Pool, *testkit.Proxy, *redis.Client, *testkit.Proxy) {
	b.t.Helper()
	pool, pgProxy := testkit.ProxiedDB(b.t, b.dbURL)
	rdb, redisProxy := testkit.ProxiedRedis(b.t, b.rdbURL)
	return pool, pgProxy, rdb, redisProxy
}

func (b *bundle) entry(tokens int64) Entry {
	return Entry{CallKey: NewToken(), OrgID: b.orgID, Provider: "p", Model: "m", TokensIn: tokens, TokensOut: 1,
		CostUSD: float64(tokens) / 1000, Latency: 20 * time.Millisecond, At: time.Now().UTC()}
}

func (b *bundle) rows() int {
	var n int
	require.NoError(b.t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM usage_ledger WHERE org_id = $1`, b.orgID).Scan(&n))
	return n
}

// spanID returns the span_id of the row of callKey, "" when NULL.
func (b *bundle) spanID(callKey string) string {
	b.t.Helper()
	var id string
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT COALESCE(span_id::text, '') FROM usage_ledger WHERE call_key = $1`, callKey).Scan(&id))
	return id
}

func (b *bundle) monthly() int64 {
	var n int64
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(tokens), 0) FROM org_monthly_usage WHERE org_id = $1`, b.orgID).Scan(&n))
	return n
}

// monthlyCost is the organisation's org_monthly_usage cost counter (all months), as text
// (numeric, exact); it must equal the sum of the organisation's ledger rows.
func (b *bundle) monthlyCost() string {
	b.t.Helper()
	var counter, ledger string
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(cost_usd), 0)::numeric(20, 8)::text FROM org_monthly_usage WHERE org_id = $1`, b.orgID).Scan(&counter))
	require.NoError(b.t, b.pool.QueryRow(context.Background(),
		`SELECT coalesce(sum(cost_usd), 0)::numeric(20, 8)::text FROM usage_ledger WHERE org_id = $1`, b.orgID).Scan(&ledger))
	require.Equal(b.t, ledger, counter, "the monthly cost counter is the sum of the ledger rows")
	return counter
}

// moved waits until the stream is empty and the ledger holds want rows of the organisation.
func (b *bundle) moved(want int) {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		n, err := b.rdb.XLen(context.Background(), streamKey).Result()
		return err == nil && n == 0 && b.rows() >= want
	}, 15*time.Second, 10*time.Millisecond)
	require.Equal(b.t, want, b.rows())
}

func (b *bundle) xadd(raw string) {
	require.NoError(b.t, b.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: streamKey, Values: []any{fieldEntry, raw}}).Err())
}

// recorder is a Metrics that remembers what it was told.
type recorder struct {
	mu       sync.Mutex
	recorded map[string]int
	moved    map[string]int
	held     int
}

func (r *recorder) Recorded(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recorded == nil {
		r.recorded = map[string]int{}
	}
	r.recorded[path]++
}

func (r *recorder) Moved(outcome string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved == nil {
		r.moved = map[string]int{}
	}
	r.moved[outcome] += n
}

func (r *recorder) MoveFailed()   {}
func (r *recorder) Backlog(int64) {}

func (r *recorder) Held(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = n
}

func (r *recorder) get(f func(*recorder) int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return f(r)
}

// An entry delivered twice through the stream, or written by the synchronous fallback and
// then moved from the stream too, is one row, and the monthly counter counts it once.
func TestEntriesAreMovedOnceEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	e1, e2, e3 := b.entry(10), b.entry(20), b.entry(40)
	e1.SpanID, e2.SpanID = uuid.NewString(), uuid.NewString()
	raw1, err := e1.encode()
	require.NoError(t, err)
	b.xadd(string(raw1))
	_, err = insert(ctx, b.pool, []Entry{e2}) // as Record's Postgres fallback would have
	require.NoError(t, err)

	w := b.writer(b.pool, b.rdb, Options{})
	for _, e := range []Entry{e1, e2, e3} {
		w.Record(ctx, e)
	}
	b.moved(3)
	require.EqualValues(t, 10+20+40+3, b.monthly(), "each call's tokens once")
	require.Equal(t, "0.07000000", b.monthlyCost(), "each call's cost once")
	require.Equal(t, 3, b.m.get(func(r *recorder) int { return r.recorded[PathStream] }))
	require.Equal(t, 2, b.m.get(func(r *recorder) int { return r.moved[MovedInserted] }), "e2 was there already")
	require.Equal(t, e1.SpanID, b.spanID(e1.CallKey), "the span id goes through the stream")
	require.Equal(t, e2.SpanID, b.spanID(e2.CallKey))
	require.Empty(t, b.spanID(e3.CallKey), "a call without a span has none")
}

// Entries a replica read and never wrote (it died) are claimed and written by another.
func TestEntriesOfADeadReplicaAreClaimed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	raw, err := b.entry(5).encode()
	require.NoError(t, err)
	b.xadd(string(raw))
	require.NoError(t, b.rdb.XGroupCreateMkStream(ctx, streamKey, group, "0").Err())
	read, err := b.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "dead", Streams: []string{streamKey, ">"}}).Result()
	require.NoError(t, err)
	require.Len(t, read[0].Messages, 1, "the dead replica read the entry")

	b.writer(b.pool, b.rdb, Options{ClaimIdle: 200 * time.Millisecond})
	b.moved(1)
	pending, err := b.rdb.XPending(ctx, streamKey, group).Result()
	require.NoError(t, err)
	require.Zero(t, pending.Count)
}

// When Redis refuses an entry, Record writes it to Postgres before it returns.
func TestRedisRefusingAnEntryWritesItToPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, _, rdb, redisProxy := b.proxied()
	w := b.writer(b.pool, rdb, Options{})
	redisProxy.Cut()
	w.Record(context.Background(), b.entry(7))
	require.Equal(t, 1, b.rows(), "in Postgres when Record returned")
	require.Equal(t, 1, b.m.get(func(r *recorder) int { return r.recorded[PathPostgres] }))
}

// When Redis and Postgres both refuse an entry it is held in memory and stored as soon as
// one of them is back: here Redis, and the mover writes it once Postgres is back too.
func TestEntryRefusedByBothStoresIsHeldUntilOneIsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, pgProxy, rdb, redisProxy := b.proxied()
	w := b.writer(pool, rdb, Options{})
	redisProxy.Cut()
	pgProxy.Cut()
	w.Record(context.Background(), b.entry(3))
	require.Equal(t, 1, b.m.get(func(r *recorder) int { return r.held }))
	require.Zero(t, b.rows())

	redisProxy.Restore()
	require.Eventually(t, func() bool { return b.m.get(func(r *recorder) int { return r.held }) == 0 },
		10*time.Second, 10*time.Millisecond, "the held entry went to the stream")
	require.Zero(t, b.rows(), "Postgres is still out")
	pgProxy.Restore()
	b.moved(1)
	require.EqualValues(t, 4, b.monthly())
	require.Equal(t, "0.00300000", b.monthlyCost())
}

// An entry Postgres refuses as invalid goes to the dead-letter stream; the entries beside
// it in its batch are written, and the mover goes on.
func TestInvalidEntriesAreBuriedNotRetriedForever(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := b.entry(1)
	bad.OrgID = "not-a-uuid"
	rawBad, err := bad.encode()
	require.NoError(t, err)
	good, err := b.entry(2).encode()
	require.NoError(t, err)
	b.xadd("not json")
	b.xadd(string(rawBad))
	b.xadd(string(good))

	b.writer(b.pool, b.rdb, Options{})
	b.moved(1)
	dead, err := b.rdb.XLen(context.Background(), deadKey).Result()
	require.NoError(t, err)
	require.EqualValues(t, 2, dead)
	require.Equal(t, 2, b.m.get(func(r *recorder) int { return r.moved[MovedDead] }))
}

// A call recorded as cut off (outcome unknown) and then answered — its router had only
// stalled — ends as one answered row, its tokens counted once; an unknown entry never
// replaces an answered row.
func TestAnsweredEntryReplacesUnknownOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	answered := b.entry(40)
	answered.SpanID = uuid.NewString()
	unknown := answered
	unknown.TokensIn, unknown.TokensOut, unknown.CostUSD, unknown.Outcome = 0, 0, 0, OutcomeUnknown

	n, err := insert(ctx, b.pool, []Entry{unknown})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, b.monthly())
	require.Equal(t, "0.00000000", b.monthlyCost())
	n, err = insert(ctx, b.pool, []Entry{answered})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the answer replaces the unknown row")
	n, err = insert(ctx, b.pool, []Entry{unknown})
	require.NoError(t, err)
	require.Zero(t, n, "an unknown entry does not replace an answered row")

	var outcome string
	var in int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT outcome, tokens_in FROM usage_ledger WHERE call_key = $1`,
		answered.CallKey).Scan(&outcome, &in))
	require.Equal(t, OutcomeAnswered, outcome)
	require.EqualValues(t, 40, in)
	require.Equal(t, 1, b.rows())
	require.EqualValues(t, 41, b.monthly(), "tokens counted once")
	require.Equal(t, "0.04000000", b.monthlyCost(), "cost counted once")
	require.Equal(t, answered.SpanID, b.spanID(answered.CallKey), "the row keeps the call's span id")

	// An answer that brings no span id keeps the unknown row's (a router from before X-Span-ID).
	a3 := b.entry(5)
	u3 := a3
	u3.SpanID, u3.TokensIn, u3.TokensOut, u3.CostUSD, u3.Outcome = uuid.NewString(), 0, 0, 0, OutcomeUnknown
	_, err = insert(ctx, b.pool, []Entry{u3})
	require.NoError(t, err)
	n, err = insert(ctx, b.pool, []Entry{a3})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, u3.SpanID, b.spanID(a3.CallKey))

	// In one batch the answered entry wins.
	a2 := b.entry(7)
	u2 := a2
	u2.TokensIn, u2.TokensOut, u2.Outcome = 0, 0, OutcomeUnknown
	require.Equal(t, []Entry{a2}, dedupe([]Entry{u2, a2}))
}

// Each month's counter holds the tokens and the cost of that month's rows, written in the
// statement that writes the rows: a batch delivered again, whole or in part, adds neither.
func TestMonthlyCountersFollowTheRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	e1, e2, last := b.entry(100), b.entry(250), b.entry(7)
	e1.CostUSD, e2.CostUSD, last.CostUSD = 0.12345678, 1.5, 0.25
	last.At = thisMonth.Add(-time.Millisecond) // the last instant of the month before

	n, err := insert(ctx, b.pool, []Entry{e1, e2, last})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for range 2 { // delivered again, whole and with a new entry beside an old one
		_, err = insert(ctx, b.pool, []Entry{e1, e2, last})
		require.NoError(t, err)
	}
	e3 := b.entry(1)
	n, err = insert(ctx, b.pool, []Entry{e2, e3})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	month := func(m time.Time) (tokens int64, cost string) {
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT tokens, cost_usd::text FROM org_monthly_usage WHERE org_id = $1 AND month = $2`,
			b.orgID, m).Scan(&tokens, &cost))
		return tokens, cost
	}
	tokens, cost := month(thisMonth)
	require.EqualValues(t, 101+251+2, tokens)
	require.Equal(t, "1.62445678", cost, "0.12345678 + 1.5 + 0.001, once each")
	tokens, cost = month(thisMonth.AddDate(0, -1, 0))
	require.EqualValues(t, 8, tokens)
	require.Equal(t, "0.25000000", cost)
	require.Equal(t, "1.87445678", b.monthlyCost())
}
