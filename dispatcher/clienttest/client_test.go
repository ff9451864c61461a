package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// bundle is a dispatcher running in-process on a fresh database and Redis, with an admin
// client of its organisation.
type bundle struct {
	t      *testing.T
	srv    *httptest.Server
	pool   *pgxpool.Pool
	orgID  string
	admin  *client.Client
	create func(roles ...auth.Role) string // a new key of the organisation
	// paths records every request path the dispatcher received.
	mu    sync.Mutex
	paths []string
	// fail, while positive, makes the next requests answer 503 before reaching the
	// dispatcher (a transient outage in front of a real server).
	fail atomic.Int32
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	redisURL, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(redisURL)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	orgID, err := bootstrap.EnsureOrg(ctx, pool, "acme", "Acme", "eu")
	require.NoError(t, err)
	_, err = bootstrap.LoadSkills(ctx, pool, orgID, filepath.Join("..", "..", "skills"), "test")
	require.NoError(t, err)

	a := app.New(app.Options{DB: pool, Redis: rdb, Asynq: opt, Log: log, ReconcileEvery: time.Hour})
	a.Start(ctx)
	b := &bundle{t: t, orgID: orgID, pool: pool}
	h := a.Handler()
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.paths = append(b.paths, r.URL.Path)
		b.mu.Unlock()
		if b.fail.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":true,"code":"DATABASE_UNAVAILABLE","message":"injected","troubleshooting":[],"context":{}}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		b.srv.Close()
		a.Stop()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !a.Registry.Live() {
		require.True(t, time.Now().Before(deadline), "registry cache did not start")
		time.Sleep(5 * time.Millisecond)
	}
	b.create = func(roles ...auth.Role) string {
		key, _, err := auth.Create(ctx, pool, orgID, "k-"+uuid.NewString()[:8], roles, "test")
		require.NoError(t, err)
		return key
	}
	b.admin = b.client(b.create(auth.RoleAdmin))
	return b
}

func (b *bundle) client(key string, opts ...client.Option) *client.Client {
	b.t.Helper()
	opts = append([]client.Option{client.WithRetries(3, time.Millisecond, 10*time.Millisecond),
		client.WithPollInterval(20 * time.Millisecond)}, opts...)
	c, err := client.New(b.srv.URL, key, opts...)
	require.NoError(b.t, err)
	return c
}

func (b *bundle) requests(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.paths {
		if p == path {
			n++
		}
	}
	return n
}

var hello = client.DispatchRequest{JobType: "demo_llm", Payload: map[string]any{"prompt": "hi"}}

func TestDispatchGetSpansEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := hello
	req.Priority, req.UserID = client.PriorityHigh, "u1"
	req.Metadata = &client.Metadata{SourceService: "crm", CorrelationID: "c-1"}
	res, err := b.admin.Dispatch(ctx, req)
	require.NoError(t, err)
	require.NotEmpty(t, res.JobID)
	require.Equal(t, client.StatusQueued, res.Status)
	require.Equal(t, "default", res.Queue)
	require.False(t, res.Duplicate)
	require.Contains(t, res.WSChannel, res.JobID)

	r, err := b.admin.Get(ctx, res.JobID)
	require.NoError(t, err)
	require.Equal(t, res.JobID, r.JobID)
	require.Equal(t, "demo_llm", r.JobType)
	require.Equal(t, client.PriorityHigh, r.Priority)
	require.Equal(t, "u1", r.UserID)
	require.Contains(t, string(r.Metadata), `"source_service":"crm"`)
	require.Contains(t, string(r.Metadata), `"correlation_id":"c-1"`)
	require.False(t, r.Timings.CreatedAt.IsZero())

	s, err := b.admin.Spans(ctx, res.JobID)
	require.NoError(t, err)
	require.Equal(t, res.TraceID, s.TraceID)
	require.NotEmpty(t, s.Tree)
	require.Equal(t, "dispatch", s.Tree[0].Type)

	evs, err := b.admin.Events(ctx, res.JobID, 0)
	require.NoError(t, err)
	require.NotEmpty(t, evs)
	require.Equal(t, "job:queued", evs[len(evs)-1].Type)
	require.Equal(t, int64(1), evs[0].Seq)
	rest, err := b.admin.Events(ctx, res.JobID, evs[len(evs)-1].Seq)
	require.NoError(t, err)
	require.Empty(t, rest)
}

func TestIdempotentDispatchReturnsTheOriginal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := hello
	req.IdempotencyKey = "order-42"
	first, err := b.admin.Dispatch(context.Background(), req)
	require.NoError(t, err)
	again, err := b.admin.Dispatch(context.Background(), req)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.JobID, again.JobID)
}

func TestErrorsAreStructuredAndMatchSentinels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	_, err := b.admin.Get(ctx, uuid.NewString())
	require.ErrorIs(t, err, client.ErrJobNotFound)
	require.NotErrorIs(t, err, client.ErrSkillNotFound)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)
	require.Equal(t, "JOB_NOT_FOUND", ae.Code)
	require.NotEmpty(t, ae.Message)
	require.NotEmpty(t, ae.Troubleshooting)
	require.Contains(t, ae.Context, "job_id")

	_, err = b.admin.Dispatch(ctx, client.DispatchRequest{JobType: "no_such_skill", Payload: map[string]any{}})
	require.ErrorIs(t, err, client.ErrSkillNotFound)

	_, err = b.admin.Dispatch(ctx, client.DispatchRequest{JobType: "demo_llm", Payload: map[string]any{},
		Priority: "urgent", CallbackURL: "ftp://x"})
	require.ErrorIs(t, err, client.ErrValidationFailed)
	require.ErrorAs(t, err, &ae)
	rules := map[string]string{}
	for _, f := range ae.FieldErrors() {
		rules[f.Field] = f.Rule
	}
	require.Equal(t, map[string]string{"priority": "oneof", "callback_url": "httpurl"}, rules)

	_, err = b.client("sy_000000000000_"+strings.Repeat("0", 48)).Get(ctx, uuid.NewString())
	require.ErrorIs(t, err, client.ErrUnauthenticated)

	_, err = b.client(b.create(auth.RoleViewer)).Dispatch(ctx, hello)
	require.ErrorIs(t, err, client.ErrForbidden)
}

func TestRetriesOnlyWhatIsSafeToRepeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	res, err := b.admin.Dispatch(ctx, hello)
	require.NoError(t, err)

	// A read is retried through a transient outage.
	b.fail.Store(2)
	before := b.requests("/api/v1/dispatch/" + res.JobID)
	_, err = b.admin.Get(ctx, res.JobID)
	require.NoError(t, err)
	require.Equal(t, before+3, b.requests("/api/v1/dispatch/"+res.JobID))

	// A dispatch without an idempotency key is not: a retry could run the job twice.
	b.fail.Store(1)
	before = b.requests("/api/v1/dispatch")
	_, err = b.admin.Dispatch(ctx, hello)
	require.ErrorIs(t, err, client.ErrDatabaseUnavailable)
	require.Equal(t, before+1, b.requests("/api/v1/dispatch"))

	// With one it is, and the job is created once.
	b.fail.Store(2)
	req := hello
	req.IdempotencyKey = "retry-me"
	first, err := b.admin.Dispatch(ctx, req)
	require.NoError(t, err)
	again, err := b.admin.Dispatch(ctx, req)
	require.NoError(t, err)
	require.Equal(t, first.JobID, again.JobID)

	// Retries give up after the configured count.
	b.fail.Store(10)
	_, err = b.admin.Get(ctx, res.JobID)
	require.ErrorIs(t, err, client.ErrDatabaseUnavailable)
	b.fail.Store(0)
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The backoff is an hour, so only Retry-After (1 s, from the real rate limiter's answer
	// shape) can make the retry happen within the context's deadline.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":true,"code":"RATE_LIMITED","message":"slow down","troubleshooting":[],"context":{}}`)
			return
		}
		b.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "", client.WithRetries(1, time.Hour, time.Hour))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Skills.List(ctx, "")
	// The retry reached the dispatcher, which refuses the missing key: proof it happened.
	require.ErrorIs(t, err, client.ErrUnauthenticated)
	require.Equal(t, int32(2), calls.Load())
}

func TestRateLimitedAnswerCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	one := 1
	_, err := b.admin.Org.Update(ctx, client.OrgPatch{OrgRPM: &one})
	require.NoError(t, err)
	noRetry := b.client(b.create(auth.RoleDispatch), client.WithRetries(0, 0, 0))
	var last error
	require.Eventually(t, func() bool {
		_, last = noRetry.Dispatch(ctx, hello)
		return errors.Is(last, client.ErrRateLimited)
	}, 10*time.Second, 10*time.Millisecond)
	var ae *client.APIError
	require.ErrorAs(t, last, &ae)
	require.Equal(t, http.StatusTooManyRequests, ae.Status)
	require.Positive(t, ae.RetryAfter)
}

func TestListFiltersAndIterates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := map[string]bool{}
	for range 5 {
		res, err := b.admin.Dispatch(ctx, hello)
		require.NoError(t, err)
		ids[res.JobID] = true
	}
	page, err := b.admin.List(ctx, client.ListOptions{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.NotEmpty(t, page.NextCursor)

	seen := map[string]bool{}
	for r, err := range b.admin.ListAll(ctx, client.ListOptions{Limit: 2, Status: client.StatusQueued, JobType: "demo_llm"}) {
		require.NoError(t, err)
		require.False(t, seen[r.JobID], "a run is listed twice")
		seen[r.JobID] = true
	}
	require.Equal(t, ids, seen)

	none, err := b.admin.List(ctx, client.ListOptions{JobType: "demo_other"})
	require.NoError(t, err)
	require.Empty(t, none.Items)
	none, err = b.admin.List(ctx, client.ListOptions{Since: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, none.Items)
}

// reviewSkill binds a job type that always waits for approval.
func reviewSkill(t *testing.T, c *client.Client) string {
	t.Helper()
	_, created, err := c.Skills.Put(context.Background(), client.SkillSpec{JobType: "needs_review", Enabled: true,
		ExecutionType: "llm_only", RequiresApproval: true, Description: "held for a reviewer"})
	require.NoError(t, err)
	require.True(t, created)
	return "needs_review"
}

func TestCancelApproveReject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	jobType := reviewSkill(t, b.admin)
	held := func() string {
		res, err := b.admin.Dispatch(ctx, client.DispatchRequest{JobType: jobType, Payload: map[string]any{"prompt": "x"}})
		require.NoError(t, err)
		require.Equal(t, client.StatusHeldForReview, res.Status)
		require.NotEmpty(t, res.HoldReasons)
		return res.JobID
	}
	a, r, c := held(), held(), held()

	reviews, err := b.admin.Reviews(ctx)
	require.NoError(t, err)
	require.Len(t, reviews, 3)
	require.Equal(t, client.StatusHeldForReview, reviews[0].Status)

	ans, err := b.admin.Approve(ctx, a, "looks fine")
	require.NoError(t, err)
	require.Equal(t, client.StatusQueued, ans.Status)
	_, err = b.admin.Approve(ctx, a, "again")
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)
	require.ErrorIs(t, err, client.ErrJobNotReviewable)

	_, err = b.admin.Reject(ctx, r, "")
	require.ErrorIs(t, err, client.ErrValidationFailed)
	ans, err = b.admin.Reject(ctx, r, "not today")
	require.NoError(t, err)
	require.Equal(t, client.StatusRejected, ans.Status)

	ans, err = b.admin.Cancel(ctx, c)
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, ans.Status)

	queued, err := b.admin.Dispatch(ctx, hello)
	require.NoError(t, err)
	ans, err = b.admin.Cancel(ctx, queued.JobID)
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, ans.Status)

	// A dispatch-only key may not review.
	_, err = b.client(b.create(auth.RoleDispatch)).Approve(ctx, held(), "")
	require.ErrorIs(t, err, client.ErrForbidden)
}

func TestSkillsAdministration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	spec := client.SkillSpec{JobType: "digest_text", Enabled: true, ExecutionType: "llm_only",
		Description: "Summarises text", RiskLevel: "limited", MaxTokens: 300}
	s, created, err := b.admin.Skills.Put(ctx, spec)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 1, s.Version)
	require.Equal(t, "limited", s.RiskLevel)

	spec.MaxTokens = 400
	s, created, err = b.admin.Skills.Put(ctx, spec)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, 2, s.Version)
	require.Equal(t, 400, s.MaxTokens)

	got, err := b.admin.Skills.Get(ctx, "digest_text")
	require.NoError(t, err)
	require.Equal(t, s.Version, got.Version)
	list, err := b.admin.Skills.List(ctx, "digest")
	require.NoError(t, err)
	require.Len(t, list, 1)

	_, err = b.admin.Skills.Disable(ctx, "digest_text")
	require.NoError(t, err)
	_, err = b.admin.Dispatch(ctx, client.DispatchRequest{JobType: "digest_text", Payload: map[string]any{}})
	require.ErrorIs(t, err, client.ErrSkillNotFound)
	s, err = b.admin.Skills.Enable(ctx, "digest_text")
	require.NoError(t, err)
	require.True(t, s.Enabled)

	hist, err := b.admin.Skills.History(ctx, "digest_text")
	require.NoError(t, err)
	require.Len(t, hist, 4)
	require.Equal(t, "create", hist[len(hist)-1].Action)
	require.Equal(t, "enable", hist[0].Action)
	require.NotEmpty(t, hist[0].ChangedBy)

	_, err = b.admin.Skills.Get(ctx, "nope")
	require.ErrorIs(t, err, client.ErrSkillNotFound)
	_, _, err = b.client(b.create(auth.RoleDispatch)).Skills.Put(ctx, spec)
	require.ErrorIs(t, err, client.ErrForbidden)
}

func TestKeysQueuesOrgAndUsage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	k, err := b.admin.Keys.Create(ctx, "crm", "dispatch", "viewer")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(k.Secret, "sy_"))
	require.Equal(t, "crm", k.Name)
	require.ElementsMatch(t, []string{"dispatch", "viewer"}, k.Roles)

	crm := b.client(k.Secret)
	_, err = crm.Dispatch(ctx, hello)
	require.NoError(t, err)

	keys, err := b.admin.Keys.List(ctx)
	require.NoError(t, err)
	var listed *client.Key
	for i := range keys {
		if keys[i].ID == k.ID {
			listed = &keys[i]
		}
	}
	require.NotNil(t, listed)
	require.False(t, listed.CreatedAt.IsZero())
	require.NotEmpty(t, listed.CreatedBy)
	require.Nil(t, listed.RevokedAt)

	require.NoError(t, b.admin.Keys.Revoke(ctx, k.ID))
	// Dispatchers cache keys and drop a revoked one when Postgres notifies them.
	require.Eventually(t, func() bool {
		_, err = crm.Dispatch(ctx, hello)
		return errors.Is(err, client.ErrUnauthenticated)
	}, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, b.admin.Keys.Revoke(ctx, uuid.NewString()), client.ErrKeyNotFound)
	_, err = crm.Keys.List(ctx)
	require.ErrorIs(t, err, client.ErrUnauthenticated)

	org, err := b.admin.Org.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, "eu", org.Jurisdiction)
	kw := []string{"project-x"}
	org, err = b.admin.Org.Update(ctx, client.OrgPatch{PIIKeywords: &kw})
	require.NoError(t, err)
	require.Equal(t, kw, org.PIIKeywords)

	qs, err := b.admin.Queues.List(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, qs)
	q, err := b.admin.Queues.Put(ctx, client.Queue{Name: "batch-" + uuid.NewString()[:6], Class: "cpu", Concurrency: 2, TimeoutSeconds: 60})
	require.NoError(t, err)
	require.Equal(t, 2, q.Concurrency)

	u, err := b.admin.Org.Usage(ctx, "")
	require.NoError(t, err)
	require.Equal(t, time.Now().UTC().Format("2006-01"), u.Month)
	_, err = b.admin.Org.Usage(ctx, "not-a-month")
	require.ErrorIs(t, err, client.ErrValidationFailed)
}

func TestWatchFollowsUntilTerminal(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"websocket", "polling"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var opts []client.Option
			if mode == "polling" {
				opts = append(opts, client.WithPollingOnly())
			}
			c := b.client(b.create(auth.RoleAdmin), opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := c.Dispatch(ctx, hello)
			require.NoError(t, err)

			// The first event comes from the journal; the cancellation arrives live.
			var types []string
			var seqs []int64
			for e, err := range c.Watch(ctx, res.JobID, 0) {
				require.NoError(t, err)
				types = append(types, e.Type)
				seqs = append(seqs, e.Seq)
				if e.Type == "job:queued" {
					_, err := c.Cancel(ctx, res.JobID)
					require.NoError(t, err)
				}
			}
			require.Equal(t, "job:queued", types[0])
			require.Equal(t, "job:cancelled", types[len(types)-1])
			for i := 1; i < len(seqs); i++ {
				require.Equal(t, seqs[i-1]+1, seqs[i], "events are in order without gaps: %v", seqs)
			}

			if mode == "websocket" {
				require.Equal(t, 1, b.requests("/api/v1/stream"))
				require.Zero(t, b.requests("/api/v1/dispatch/"+res.JobID+"/events"), "the socket carried every event")
			}

			// Resuming after the last seq of a finished job ends at once.
			n := 0
			for _, err := range c.Watch(ctx, res.JobID, seqs[len(seqs)-1]) {
				require.NoError(t, err)
				n++
			}
			require.Zero(t, n)

			if mode == "polling" {
				require.Zero(t, b.requests("/api/v1/stream"))
				require.Positive(t, b.requests("/api/v1/dispatch/"+res.JobID+"/events"))
			}
		})
	}
}

func TestWatchReportsAMissingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got error
	for _, err := range b.admin.Watch(ctx, uuid.NewString(), 0) {
		got = err
	}
	require.ErrorIs(t, got, client.ErrJobNotFound)
}
