// Package runstore is the one owner of a run's rows: it alone reads and writes the runs
// table, a run's replay journal (run_journal), its event journal (run_events), its spans,
// its batch (batches), its chain (chains, chain_steps: chains.go) and its snapshots
// (run_snapshots: snapshots.go). Every status change goes through Transition, which checks it
// against the table of legal transitions in shared/run. Other packages declare the narrow
// interface they need of *Store at their side (a runWriter, an eventJournal, ...).
//
// Static statements live in sql/*.sql, embedded; statements whose shape depends on the
// call (a transition's SET list, the events a statement journals as a CTE) are composed
// here from named fragments. docs/decisions.md (2026-11-24) says why this is not sqlc.
package runstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// DB is what the store needs of a pool, a connection or a transaction: *pgxpool.Pool,
// *pgx.Conn and pgx.Tx all satisfy it. This is the only declaration of such an interface
// for run data.
type DB interface {
	postgres.Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrNotFound is returned when no run has the given id (in the caller's organisation,
// where the call names one).
var ErrNotFound = errors.New("run not found")

// Store reads and writes run data through a pool or a transaction.
type Store struct {
	db DB
}

// New returns a store on db.
func New(db DB) *Store { return &Store{db: db} }

// InTx runs fn with a store on one transaction, committed when fn returns nil and rolled
// back otherwise.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error { return fn(New(tx)) })
}

// SendBatch runs the statements queued into b (by the Queue* functions of this package) in
// one round trip and one implicit transaction: all of them or none.
func (s *Store) SendBatch(ctx context.Context, b *pgx.Batch) error {
	return s.db.SendBatch(ctx, b).Close()
}
