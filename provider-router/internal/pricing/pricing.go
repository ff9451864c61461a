// Package pricing turns token counts into money with the registry's prices, per
// (provider kind, model), in USD per million tokens: an organisation's own price
// (org_prices) over the platform's default (prices).
package pricing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Price is what one million tokens cost.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
	CachedPerMTok float64
}

// Cost of a call. Cached prompt tokens are billed at the cached price.
func (p Price) Cost(promptTokens, completionTokens, cachedTokens int64) float64 {
	uncached := max(promptTokens-cachedTokens, 0)
	return (float64(uncached)*p.InputPerMTok + float64(cachedTokens)*p.CachedPerMTok +
		float64(completionTokens)*p.OutputPerMTok) / 1e6
}

// WorstCase is the most a call can cost: every prompt token at the input price and
// maxTokens of output.
func (p Price) WorstCase(promptTokens, maxTokens int64) float64 {
	return (float64(promptTokens)*p.InputPerMTok + float64(maxTokens)*p.OutputPerMTok) / 1e6
}

// ErrUnknown is returned for a model without a price.
var ErrUnknown = errors.New("no price for model")

// Table reads prices from the registry, cached for TTL.
type Table struct {
	DB  *pgxpool.Pool
	TTL time.Duration // default 30s

	mu      sync.Mutex
	prices  map[string]Price
	expires time.Time
}

// Lookup returns the price of a model of a provider kind for an organisation: its own
// price, else the platform's default.
func (t *Table) Lookup(ctx context.Context, orgID, kind, model string) (Price, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.prices == nil || time.Now().After(t.expires) {
		prices, err := t.load(ctx)
		if err != nil {
			return Price{}, err
		}
		ttl := t.TTL
		if ttl == 0 {
			ttl = 30 * time.Second
		}
		t.prices, t.expires = prices, time.Now().Add(ttl)
	}
	p, ok := t.prices[orgID+"\x00"+kind+"\x00"+model]
	if !ok {
		p, ok = t.prices["\x00"+kind+"\x00"+model]
	}
	if !ok {
		return Price{}, fmt.Errorf("%w %s/%s", ErrUnknown, kind, model)
	}
	return p, nil
}

// Invalidate makes the next Lookup read the table again (the registry watcher calls it
// when a price changes).
func (t *Table) Invalidate() {
	t.mu.Lock()
	t.expires = time.Time{}
	t.mu.Unlock()
}

func (t *Table) load(ctx context.Context) (map[string]Price, error) {
	rows, err := t.DB.Query(ctx, `SELECT '', provider_kind, model, input_per_mtok::float8, output_per_mtok::float8,
		cached_per_mtok::float8 FROM prices
		UNION ALL SELECT org_id::text, provider_kind, model, input_per_mtok::float8, output_per_mtok::float8,
		cached_per_mtok::float8 FROM org_prices`)
	if err != nil {
		return nil, fmt.Errorf("reading prices: %w", err)
	}
	defer rows.Close()
	prices := map[string]Price{}
	for rows.Next() {
		var org, kind, model string
		var p Price
		if err := rows.Scan(&org, &kind, &model, &p.InputPerMTok, &p.OutputPerMTok, &p.CachedPerMTok); err != nil {
			return nil, err
		}
		prices[org+"\x00"+kind+"\x00"+model] = p
	}
	return prices, rows.Err()
}
