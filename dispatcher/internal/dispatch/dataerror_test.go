package dispatch

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// TestDataErrorsAreBadRequests: whatever value Postgres refuses as invalid data (SQLSTATE
// class 22) reaches the client as a 400, not as DATABASE_UNAVAILABLE "safe to retry"; an
// unreachable database still is a 503.
func TestDataErrorsAreBadRequests(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	for payload, sqlstate := range map[string]string{
		`{"s":"\u0000"}`:   "22P05", // NUL: jsonb has no such character
		`{"s":"\ud800"}`:   "22P02", // an unpaired surrogate
		"{\"s\":\"\xff\"}": "22021", // not UTF-8
	} {
		_, err := pool.Exec(ctx, `SELECT $1::jsonb`, payload) // as a run's payload is written
		require.Error(t, err, payload)
		ae := dbError(err)
		require.Equal(t, http.StatusBadRequest, ae.Status, payload)
		require.Equal(t, "VALIDATION_FAILED", ae.Code)
		require.Equal(t, sqlstate, ae.Context["sqlstate"], payload)
		require.Equal(t, "data", ae.Context["fields"].([]FieldError)[0].Rule)
	}
	_, err := pool.Exec(ctx, `SELECT 1e20::numeric(14, 6)`)
	require.Equal(t, "22003", dbError(err).Context["sqlstate"])
	require.Equal(t, "holds a number out of the range that can be stored", dbError(err).Context["fields"].([]FieldError)[0].Message)

	require.Equal(t, http.StatusServiceUnavailable, dbError(errors.New("dial tcp: connection refused")).Status)
}
