// Package run defines a run's lifecycle — its statuses and the one table of legal
// transitions between them — and the other run types services agree on. The run store
// (runstore) is the one place that changes a run's status in Postgres, and it checks every
// change against this table.
package run

import "slices"

// Status is where a run is in its lifecycle.
type Status string

// The statuses of ARCHITECTURE.md, Contracts.
const (
	HeldForReview            Status = "held_for_review"
	Queued                   Status = "queued"
	Running                  Status = "running"
	PendingReview            Status = "pending_review"
	Completed                Status = "completed"
	CompletedMaxIterations   Status = "completed_max_iterations"
	CompletedBudgetExhausted Status = "completed_budget_exhausted"
	Failed                   Status = "failed"
	TimedOut                 Status = "timed_out"
	Cancelled                Status = "cancelled"
	Rejected                 Status = "rejected"
	Skipped                  Status = "skipped"
)

// transitions lists, for each status, the statuses a run may move to from it.
// Running -> Queued is a retry after a transient failure or a drained worker; Running ->
// Rejected is a resumed run whose held tool call a reviewer rejected.
var transitions = map[Status][]Status{
	HeldForReview: {Queued, Rejected, Cancelled},
	Queued:        {Running, Cancelled, Failed, Skipped},
	Running: {Queued, PendingReview, Completed, CompletedMaxIterations, CompletedBudgetExhausted,
		Failed, TimedOut, Cancelled, Rejected},
	PendingReview: {Queued, Rejected, Cancelled, TimedOut},
}

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool {
	_, ok := transitions[s]
	return !ok && s.Valid()
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case HeldForReview, Queued, Running, PendingReview, Completed, CompletedMaxIterations,
		CompletedBudgetExhausted, Failed, TimedOut, Cancelled, Rejected, Skipped:
		return true
	}
	return false
}

// CanTransition reports whether a run may move from one status to another.
func CanTransition(from, to Status) bool {
	return slices.Contains(transitions[from], to)
}

// Sources returns every status from which a run may move to `to`, sorted.
func Sources(to Status) []Status {
	var from []Status
	for f, tos := range transitions {
		if slices.Contains(tos, to) {
			from = append(from, f)
		}
	}
	slices.Sort(from)
	return from
}
