// Package store holds the dispatcher's SQL of the registry — organisations, queues, tools,
// skill snapshots — and of reviews. Runs, their events and spans are the run store's
// (runstore): handlers and the pipeline reach them through narrow interfaces of it. No SQL
// lives elsewhere in the dispatcher except the shared skill package.
package store

import (
	"errors"

	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// DB is what the store needs of a pool or a transaction.
type DB = postgres.Querier

// ErrNotFound is returned when a row does not exist in the caller's organisation.
var ErrNotFound = errors.New("not found")
