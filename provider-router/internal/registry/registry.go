// Package registry keeps a router replica in step with the registry in Postgres: it
// LISTENs for the router_config_changed notifications of migration 00003 and hands each
// change to the caches that hold the row (routing, prices, credentials, quotas, the
// limiter's limits), and it reads provider limits for the limiter.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Channel is the notification channel of migration 00003's triggers.
const Channel = "router_config_changed"

// Change is one changed row, as the trigger describes it.
type Change struct {
	Table            string `json:"table"`
	OrgID            string `json:"org_id"`
	ProviderConfigID string `json:"provider_config_id"`
	Model            string `json:"model"`
}

// Watcher delivers changes, through the process's one postgres.Notifier. OnChange is called
// for each notification, OnReset whenever the listening connection was (re)established —
// changes may have been missed, so everything must be reloaded. Both are called from one
// goroutine, in order.
type Watcher struct {
	DB       *pgxpool.Pool
	Log      *slog.Logger
	OnChange func(ctx context.Context, c Change)
	OnReset  func(ctx context.Context)

	notifier *postgres.Notifier
}

// Start listens and returns once the first LISTEN is live (and OnReset has run), so no
// change committed after Start returns is missed.
func (w *Watcher) Start(ctx context.Context) error {
	w.notifier = postgres.NewNotifier(w.DB, w.Log)
	w.notifier.Subscribe(Channel, postgres.Handler{
		Resync: func(ctx context.Context) {
			if w.OnReset != nil {
				w.OnReset(ctx)
			}
		},
		Notify: func(ctx context.Context, payload string) {
			var c Change
			if err := json.Unmarshal([]byte(payload), &c); err != nil {
				w.Log.Warn("registry notification unreadable", "error", err)
				return
			}
			if w.OnChange != nil {
				w.OnChange(ctx, c)
			}
		},
	})
	// The watcher outlives the start-up context: Stop ends it.
	if err := w.notifier.Start(context.WithoutCancel(ctx)); err != nil {
		w.notifier.Stop()
		return fmt.Errorf("listening for %s: %w", Channel, err)
	}
	return nil
}

// Stop ends the listener.
func (w *Watcher) Stop() {
	if w.notifier != nil {
		w.notifier.Stop()
	}
}

// Limits reads one bucket's configured limits from provider_limits; ok=false when the
// provider has no row for the model (unlimited). It is the limiter's LimitSource.
func Limits(db *pgxpool.Pool) limiter.LimitSource {
	return func(ctx context.Context, key limiter.BucketKey) (limiter.Limits, bool, error) {
		var l limiter.Limits
		err := db.QueryRow(ctx, `SELECT rpm, tpm FROM provider_limits WHERE provider_config_id = $1 AND model = $2`,
			key.Credential, key.Model).Scan(&l.RPM, &l.TPM)
		if errors.Is(err, pgx.ErrNoRows) {
			return l, false, nil
		}
		if err != nil {
			return l, false, fmt.Errorf("reading limits of %s: %w", key, err)
		}
		return l, true, nil
	}
}

// AllLimits reads every configured limit, for a replica that (re)connected and may have
// missed changes.
func AllLimits(ctx context.Context, db *pgxpool.Pool) (map[limiter.BucketKey]limiter.Limits, error) {
	rows, err := db.Query(ctx, `SELECT provider_config_id::text, model, rpm, tpm FROM provider_limits`)
	if err != nil {
		return nil, fmt.Errorf("reading provider limits: %w", err)
	}
	out := map[limiter.BucketKey]limiter.Limits{}
	var k limiter.BucketKey
	var l limiter.Limits
	_, err = pgx.ForEachRow(rows, []any{&k.Credential, &k.Model, &l.RPM, &l.TPM}, func() error {
		out[k] = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading provider limits: %w", err)
	}
	return out, nil
}
