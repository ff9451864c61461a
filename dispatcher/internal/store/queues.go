package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Queue is a named queue of the registry.
type Queue = apitypes.Queue

// GetQueue returns a registered queue.
func GetQueue(ctx context.Context, db DB, name string) (Queue, error) {
	var q Queue
	err := db.QueryRow(ctx, `SELECT name, class, concurrency, timeout_seconds, description, updated_at
		FROM queues WHERE name = $1`, name).Scan(&q.Name, &q.Class, &q.Concurrency, &q.TimeoutSeconds, &q.Description, &q.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Queue{}, ErrNotFound
	}
	if err != nil {
		return Queue{}, fmt.Errorf("reading queue %q: %w", name, err)
	}
	return q, nil
}

// ListQueues returns every registered queue.
func ListQueues(ctx context.Context, db DB) ([]Queue, error) {
	rows, err := db.Query(ctx, `SELECT name, class, concurrency, timeout_seconds, description, updated_at
		FROM queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing queues: %w", err)
	}
	defer rows.Close()
	var qs []Queue
	for rows.Next() {
		var q Queue
		if err := rows.Scan(&q.Name, &q.Class, &q.Concurrency, &q.TimeoutSeconds, &q.Description, &q.UpdatedAt); err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, rows.Err()
}

// PutQueue creates or updates a queue; executors follow the change.
func PutQueue(ctx context.Context, db DB, q Queue) (Queue, bool, error) {
	var created bool
	err := db.QueryRow(ctx, `INSERT INTO queues (name, class, concurrency, timeout_seconds, description)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (name) DO UPDATE SET class = EXCLUDED.class, concurrency = EXCLUDED.concurrency,
			timeout_seconds = EXCLUDED.timeout_seconds, description = EXCLUDED.description, updated_at = now()
		RETURNING updated_at, (xmax = 0)`, q.Name, q.Class, q.Concurrency, q.TimeoutSeconds, q.Description).
		Scan(&q.UpdatedAt, &created)
	if err != nil {
		return q, false, fmt.Errorf("saving queue %q: %w", q.Name, err)
	}
	return q, created, nil
}

// QueueLabels are the labels work may be sent to: every queue's name and the queue classes
// (a workflow's runs-on).
func QueueLabels(ctx context.Context, db DB) ([]string, error) {
	qs, err := ListQueues(ctx, db)
	if err != nil {
		return nil, err
	}
	return Labels(qs), nil
}

// Labels are the labels of queues qs: their names and the queue classes.
func Labels(qs []Queue) []string {
	labels := []string{"cpu", "gpu"}
	for _, q := range qs {
		labels = append(labels, q.Name)
	}
	return labels
}
