package callback

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// The sender runs a loop and one goroutine per delivery; none may outlive them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A delivered callback leaves nothing behind: each delivery dials through a transport of
// its own (the organisation's SSRF guard), so a connection it kept idle would never be
// used again and would hold a socket and two goroutines until the transport's idle timeout.
// Not parallel: the goroutine check counts the whole process's goroutines.
func TestDeliveredCallbackLeavesNoConnectionBehind(t *testing.T) {
	_, pool := testkit.DB(t)
	orgID := testkit.NewOrg(t, pool)
	ctx := context.Background()
	var secret string
	require.NoError(t, pool.QueryRow(ctx, `UPDATE orgs SET callback_allowlist = ARRAY['127.0.0.1'] WHERE id = $1
		RETURNING callback_secret`, orgID).Scan(&secret))
	got := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
		got <- Verify(secret, ts, body, r.Header.Get(HeaderSignature), time.Minute, time.Now())
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	runID := uuid.NewString()
	_, err := pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
		execution_type, queue, status, payload, callback_url, finished_at)
		VALUES ($1, $2, $3, 'x', 1, '{}', 'llm_only', 'default', 'completed', '{}', $4, now())`,
		runID, orgID, uuid.NewString(), srv.URL+"/hook")
	require.NoError(t, err)

	before := goleak.IgnoreCurrent()
	s := &Sender{DB: pool, Log: slog.New(slog.DiscardHandler)}
	n, err := s.Once(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, <-got, "signed with the organisation's secret")
	var done bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT callback_done_at IS NOT NULL FROM runs WHERE id = $1`, runID).Scan(&done))
	require.True(t, done, "delivered")
	// While the endpoint is still up: a connection the delivery kept would show here.
	goleak.VerifyNone(t, before)
}
