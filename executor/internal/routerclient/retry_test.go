package routerclient

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// TestRetryableFollowsTheCodeTable checks that the executor retries exactly the router
// answers it retried when it kept its own list of permanent codes: shared/apierr's
// Permanent attribute now decides, and must not retry more or fewer of them.
func TestRetryableFollowsTheCodeTable(t *testing.T) {
	t.Parallel()
	// The list the executor kept before the codes had one table.
	before := map[string]bool{
		apierr.CodeValidationFailed: true, apierr.CodeBudgetExceeded: true, apierr.CodeResidencyViolation: true,
		apierr.CodeRoutingFailed: true, apierr.CodeQuotaExceeded: true, apierr.CodeForbidden: true,
		apierr.CodeProviderRejected: true, apierr.CodeRateLimitDeadline: true,
	}
	statuses := []int{http.StatusBadRequest, http.StatusPaymentRequired, http.StatusForbidden, http.StatusNotFound,
		http.StatusUnprocessableEntity, http.StatusTooManyRequests, apierr.StatusClientClosedRequest,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}
	for _, s := range apierr.Codes() {
		if s.Where&apierr.Router == 0 {
			continue
		}
		sts := []int{s.Status}
		if s.Status == 0 { // BAD_REQUEST: echo's other 4xx answers
			sts = []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity}
		}
		for _, st := range sts {
			want := !before[s.Code] && (st == http.StatusTooManyRequests || st >= 500)
			require.Equal(t, want, retryable(st, s.Code), "%s %d", s.Code, st)
		}
	}
	for _, st := range statuses {
		want := st == http.StatusTooManyRequests || st >= 500
		require.Equal(t, want, retryable(st, "NOT_A_CODE"), "an unknown code with %d", st)
	}
}
