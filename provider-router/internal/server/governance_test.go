package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRoutingFailedNamesProvidersAndPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	h := b.headers()
	h["X-Routing-Hint"] = "reasoning"
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusUnprocessableEntity, code, "%v", out)
	require.Equal(t, "ROUTING_FAILED", errCode(out))
	ctx := out["context"].(map[string]any)
	require.Equal(t, []any{"upstream"}, ctx["enabled_providers"])
	require.Equal(t, map[string]any{"default": "upstream"}, ctx["policy"])
	require.Zero(t, b.served())
}

func TestResidency(t *testing.T) {
	t.Parallel()
	b := setup(t, options{jurisdiction: "global"})
	for _, res := range []string{"eu_only", "us_only"} {
		h := b.headers()
		h["X-Data-Residency"] = res
		code, out := b.chat(h, simpleBody)
		require.Equal(t, http.StatusForbidden, code, "%v", out)
		require.Equal(t, "RESIDENCY_VIOLATION", errCode(out))
		require.Equal(t, "global", out["context"].(map[string]any)["jurisdiction"])
	}
	require.Zero(t, b.served(), "no silent fallback: the provider was never called")
	h := b.headers()
	h["X-Data-Residency"] = "any"
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)

	// An EU endpoint serves eu_only.
	_, err := b.pool.Exec(context.Background(), `UPDATE provider_configs SET jurisdiction = 'eu', updated_at = now() WHERE id = $1`, b.providerID)
	require.NoError(t, err)
	b.srv.Routes.Invalidate("")
	h["X-Data-Residency"] = "eu_only"
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
}

func TestUserPreferenceOnlyForDefaultHint(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	// A second provider (same upstream) that only the preference can select.
	_, err := b.pool.Exec(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models)
		SELECT org_id, 'preferred', kind, base_url, jurisdiction, models FROM provider_configs WHERE id = $1`, b.providerID)
	require.NoError(t, err)
	h := b.headers()
	h["X-User-Preference"] = "preferred"
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "preferred", out["provider"])
	h["X-User-Preference"] = "no-such-provider"
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "upstream", out["provider"], "an unknown preference is ignored")
}

func TestBudgetExceededBeforeTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	h := b.headers()
	// Worst case: ~10 prompt tokens at $0.15/M + 20 output tokens at $0.60/M ≈ $0.000014.
	h["X-Cost-Ceiling-USD"] = "0.00001"
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusPaymentRequired, code, "%v", out)
	require.Equal(t, "BUDGET_EXCEEDED", errCode(out))
	require.Equal(t, "run", out["context"].(map[string]any)["scope"])
	require.Zero(t, b.served(), "the provider never saw the call")
}

func TestRunCeilingHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	h := b.headers()
	const ceiling = 0.00005 // about 3 worst cases of simpleBody
	h["X-Cost-Ceiling-USD"] = "0.00005"
	var wg sync.WaitGroup
	var mu sync.Mutex
	var spent float64
	codes := map[int]int{}
	for range 12 {
		wg.Go(func() {
			code, out := b.chat(h, simpleBody)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			if code == http.StatusOK {
				spent += out["cost_usd"].(float64)
			} else {
				require.Equal(t, "BUDGET_EXCEEDED", errCode(out))
			}
		})
	}
	wg.Wait()
	require.Positive(t, codes[http.StatusPaymentRequired], "some calls were refused: %v", codes)
	require.Positive(t, codes[http.StatusOK], "%v", codes)
	require.LessOrEqual(t, spent, ceiling, "never an overspend")
	require.EqualValues(t, codes[http.StatusOK], b.served())
}

func TestChainCeiling(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var chainID string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO chains (org_id, trace_id, job_type, status, definition, cost_ceiling_usd, cost_usd)
		VALUES ($1, gen_random_uuid(), 'c', 'running', '{}', 0.001, 0.00099) RETURNING id`, b.orgID).Scan(&chainID))
	h := b.headers()
	h["X-Chain-ID"] = chainID
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusPaymentRequired, code, "%v", out)
	require.Equal(t, "chain", out["context"].(map[string]any)["scope"])
	require.Zero(t, b.served())
}

func TestPriceUnknownWithCeiling(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := b.pool.Exec(context.Background(), `DELETE FROM prices`)
	require.NoError(t, err)
	b.srv.Prices.Invalidate()
	h := b.headers()
	h["X-Cost-Ceiling-USD"] = "10"
	code, out := b.chat(h, simpleBody)
	require.Equal(t, http.StatusUnprocessableEntity, code, "%v", out)
	require.Equal(t, "PRICE_UNKNOWN", errCode(out))
	require.Zero(t, b.served())
	delete(h, "X-Cost-Ceiling-USD")
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusOK, code, "without a ceiling an unpriced call is served (cost 0): %v", out)
}

func TestMonthlyQuota(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	// One call reserves its prompt (~10) + max_tokens 20; a quota of 45 admits one call.
	_, err := b.pool.Exec(context.Background(), `UPDATE orgs SET monthly_token_quota = 45 WHERE id = $1`, b.orgID)
	require.NoError(t, err)
	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	b.srv.Wait() // the reservation is reconciled with actual usage after the answer
	code, out = b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusTooManyRequests, code, "%v", out)
	require.Equal(t, "QUOTA_EXCEEDED", errCode(out))
	require.Equal(t, time.Now().UTC().Format("2006-01"), out["context"].(map[string]any)["month"])
	require.EqualValues(t, 1, b.served())
}

func TestDeadlineUnreachable(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := b.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm) VALUES ($1, 'sim-fast', 1)`, b.providerID)
	require.NoError(t, err)
	code, out := b.chat(b.headers(), simpleBody)
	require.Equal(t, http.StatusOK, code, "%v", out)
	h := b.headers()
	h["X-Deadline"] = time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	code, out, hdr := chatVia(t, b.client, b.url, h, simpleBody)
	require.Equal(t, http.StatusTooManyRequests, code, "%v", out)
	require.Equal(t, "RATE_LIMIT_DEADLINE", errCode(out))
	require.NotEmpty(t, hdr.Get("Retry-After"))
	require.EqualValues(t, 1, b.served())
}

// A caller that will not wait long (X-Capacity-Wait-MS) is told at once when to come back,
// instead of holding its worker in the queue; no provider call is made.
func TestCapacityWaitAnswersWhenToComeBack(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := b.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm) VALUES ($1, 'sim-fast', 6)`, b.providerID)
	require.NoError(t, err)
	for range 6 { // drain the bucket: the next call waits 10 s for a refill
		code, out := b.chat(b.headers(), simpleBody)
		require.Equal(t, http.StatusOK, code, "%v", out)
	}
	h := b.headers()
	h["X-Capacity-Wait-MS"] = "2000"
	started := time.Now()
	code, out, hdr := chatVia(t, b.client, b.url, h, simpleBody)
	require.Less(t, time.Since(started), 2*time.Second, "answered at once, not after waiting")
	require.Equal(t, http.StatusTooManyRequests, code, "%v", out)
	require.Equal(t, "RATE_LIMIT_WAIT", errCode(out))
	ctx := out["context"].(map[string]any)
	require.InDelta(t, 9000, ctx["retry_after_ms"], 1500, "one refill (10 s) less MaxWait/2")
	require.Equal(t, "9", hdr.Get("Retry-After"))
	require.EqualValues(t, 6, b.served())

	h["X-Capacity-Wait-MS"] = "soon"
	code, out = b.chat(h, simpleBody)
	require.Equal(t, http.StatusBadRequest, code, "%v", out)
	require.Equal(t, "X-Capacity-Wait-MS", out["context"].(map[string]any)["header"])
}
