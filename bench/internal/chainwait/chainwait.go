// Package chainwait tells benchmarks when chains end, with one Postgres query per tick for
// every chain in flight, so that hundreds of chains waiting cost the platform no more than
// one.
package chainwait

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Waiter looks every Tick at the chains being waited for.
type Waiter struct {
	db   *pgxpool.Pool
	mu   sync.Mutex
	subs map[string]chan string
	done chan struct{}
}

// New starts a Waiter on db; Stop it when done.
func New(db *pgxpool.Pool, tick time.Duration) *Waiter {
	w := &Waiter{db: db, subs: map[string]chan string{}, done: make(chan struct{})}
	go w.loop(tick)
	return w
}

// Wait returns the chain's status once it is no longer running.
func (w *Waiter) Wait(ctx context.Context, chain string, timeout time.Duration) (string, error) {
	ch := make(chan string, 1)
	w.mu.Lock()
	w.subs[chain] = ch
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case st := <-ch:
		return st, nil
	case <-t.C:
		w.forget(chain)
		return "", fmt.Errorf("chain %s still running after %s", chain, timeout)
	case <-ctx.Done():
		w.forget(chain)
		return "", ctx.Err()
	}
}

func (w *Waiter) forget(chain string) {
	w.mu.Lock()
	delete(w.subs, chain)
	w.mu.Unlock()
}

func (w *Waiter) loop(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		ids := make([]string, 0, len(w.subs))
		for id := range w.subs {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		rows, err := w.db.Query(context.Background(),
			`SELECT id::text, status FROM chains WHERE id = ANY($1::uuid[]) AND status <> 'running'`, ids)
		if err != nil {
			continue // the next tick asks again
		}
		for rows.Next() {
			var id, status string
			if rows.Scan(&id, &status) != nil {
				continue
			}
			w.mu.Lock()
			if ch, ok := w.subs[id]; ok {
				ch <- status
				delete(w.subs, id)
			}
			w.mu.Unlock()
		}
		rows.Close()
	}
}

// Stop ends the Waiter's looks.
func (w *Waiter) Stop() { close(w.done) }
