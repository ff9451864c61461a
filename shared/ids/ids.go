// Package ids makes the identifiers of the rows written at a high rate: runs, traces, spans,
// batches.
//
// They are UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits (of which
// google/uuid uses 12 as a counter that keeps ids from one process increasing within a
// millisecond). Ids made close in time sort close, so Postgres adds each to the rightmost
// pages of a primary key or an index instead of to a random page: the working set of an index
// stays small and, after each checkpoint, the first change to a page writes that page whole
// into the write-ahead log once, not once for every random page touched. An id reveals when
// it was made, as created_at does; it grants nothing, since every read is organisation-scoped.
package ids

import "github.com/google/uuid"

// New returns a new UUIDv7 as text.
func New() string { return uuid.Must(uuid.NewV7()).String() }
