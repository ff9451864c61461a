package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Queue is a named queue of the registry.
type Queue struct {
	Name        string    `json:"name"`
	Class       string    `json:"class"`
	Concurrency int       `json:"concurrency"`
	Timeout     int       `json:"timeoutSeconds"`
	Description string    `json:"description"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// GetQueue returns a registered queue.
func GetQueue(ctx context.Context, db DB, name string) (Queue, error) {
	var q Queue
	err := db.QueryRow(ctx, `SELECT name, class, concurrency, timeout_seconds, description, updated_at
		FROM queues WHERE name = $1`, name).Scan(&q.Name, &q.Class, &q.Concurrency, &q.Timeout, &q.Description, &q.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Queue{}, ErrNotFound
	}
	if err != nil {
		return Queue{}, fmt.Errorf("reading queue %q: %w", name, err)
	}
	return q, nil
}
