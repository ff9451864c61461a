package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/aichat"
)

// quote asks the router's price endpoint with headers h.
func (b *bundle) quote(h map[string]string) (int, map[string]any) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+aichat.PricePath, nil)
	require.NoError(b.t, err)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(b.t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// TestPriceQuotesTheRoutedModel: the price endpoint answers the provider and model a call
// with the same headers would be routed to and that model's price — the organisation's own
// over the platform's default, none for an unpriced model — behind the chat endpoint's
// locks, and calls no provider.
func TestPriceQuotesTheRoutedModel(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	code, out := b.quote(b.headers())
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, map[string]any{"provider": "upstream", "model": "sim-fast", "known": true,
		"input_per_mtok": 0.15, "output_per_mtok": 0.6}, out)

	_, err := b.pool.Exec(context.Background(), `INSERT INTO org_prices (org_id, provider_kind, model, input_per_mtok, output_per_mtok)
		VALUES ($1, 'openai_compatible', 'sim-fast', 1, 2)`, b.orgID)
	require.NoError(t, err)
	b.srv.Prices.Invalidate()
	_, out = b.quote(b.headers())
	require.Equal(t, 1.0, out["input_per_mtok"], "the organisation's own price: %v", out)
	require.Equal(t, 2.0, out["output_per_mtok"])

	h := b.headers()
	h[aichat.HeaderModelOverride] = "sim-unpriced"
	code, out = b.quote(h)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "sim-unpriced", out["model"])
	require.Equal(t, false, out["known"])

	h = b.headers()
	h[aichat.HeaderRoutingHint] = "reasoning"
	code, out = b.quote(h)
	require.Equal(t, http.StatusUnprocessableEntity, code, "no policy for the hint: %v", out)
	require.Equal(t, "ROUTING_FAILED", errCode(out))

	h = b.headers()
	delete(h, aichat.HeaderServiceKey)
	code, out = b.quote(h)
	require.Equal(t, http.StatusForbidden, code, "%v", out)
	require.Zero(t, b.served(), "a quote calls no provider")
}
