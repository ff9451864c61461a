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
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
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

// Watcher delivers changes. OnChange is called for each notification, OnReset whenever
// the listening connection was (re)established — changes may have been missed, so
// everything must be reloaded. Both are called from one goroutine, in order.
type Watcher struct {
	DB       *pgxpool.Pool
	Log      *slog.Logger
	OnChange func(ctx context.Context, c Change)
	OnReset  func(ctx context.Context)

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens and returns once the first LISTEN is live (and OnReset has run), so no
// change committed after Start returns is missed.
func (w *Watcher) Start(ctx context.Context) error {
	conn, err := w.listen(ctx)
	if err != nil {
		return err
	}
	if w.OnReset != nil {
		w.OnReset(ctx)
	}
	lctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { w.loop(lctx, conn) })
	return nil
}

// Stop ends the listener.
func (w *Watcher) Stop() {
	if w.cancel != nil {
		w.cancel()
		w.wg.Wait()
	}
}

func (w *Watcher) listen(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := w.DB.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring a connection to LISTEN: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		conn.Release()
		return nil, fmt.Errorf("LISTEN %s: %w", Channel, err)
	}
	return conn, nil
}

func (w *Watcher) loop(ctx context.Context, conn *pgxpool.Conn) {
	defer func() {
		if conn != nil {
			// A connection that was LISTENing must not go back to the pool.
			_ = conn.Conn().Close(context.Background())
			conn.Release()
		}
	}()
	backoff := 100 * time.Millisecond
	for {
		if conn == nil {
			var err error
			if conn, err = w.listen(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				w.Log.Warn("registry listener reconnecting", "error", err, "in", backoff.String())
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
			backoff = 100 * time.Millisecond
			if w.OnReset != nil {
				w.OnReset(ctx)
			}
		}
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.Log.Warn("registry listener lost its connection", "error", err)
			_ = conn.Conn().Close(context.Background())
			conn.Release()
			conn = nil
			continue
		}
		var c Change
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			w.Log.Warn("registry notification unreadable", "error", err)
			continue
		}
		if w.OnChange != nil {
			w.OnChange(ctx, c)
		}
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
