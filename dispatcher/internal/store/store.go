// Package store holds the dispatcher's SQL of the registry — organisations, queues, tools,
// skill snapshots — and of reviews. Runs, their events and spans are the run store's
// (runstore): handlers and the pipeline reach them through narrow interfaces of it. No SQL
// lives elsewhere in the dispatcher except the shared skill package.
package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the store needs of a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound is returned when a row does not exist in the caller's organisation.
var ErrNotFound = errors.New("not found")
