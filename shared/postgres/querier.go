package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what a store's queries need of a pool, a connection or a transaction:
// *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it. Stores declare their DB as this (or
// embed it when they need more), so one store's functions run inside another's transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
