package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Chains: the store owns the chains and chain_steps tables beside runs. The dispatcher's
// coordinator changes a chain only inside a transaction that holds the chain's lock
// (LockChain), so each transition — a start, a step's end, a cancellation — applies whole
// and one at a time.

// ErrChainNotFound is returned when no chain has the given id (in the organisation, where
// the call names one).
var ErrChainNotFound = errors.New("chain not found")

// NewChain is the row written when a chain is dispatched.
type NewChain struct {
	ID, OrgID, TraceID, JobType string
	Definition, Input           json.RawMessage
	UserID, Priority            string
	CostCeilingUSD              *float64
	Deadline                    *time.Time
	ParentRunID                 string
	RerunOf                     string
}

// QueueChain adds the chain's insert to a batch; queue it before the runs that reference it.
func QueueChain(b *pgx.Batch, c NewChain) {
	b.Queue(insertChainSQL, c.ID, c.OrgID, c.TraceID, c.JobType, c.Definition, c.Input, c.UserID, c.Priority,
		c.CostCeilingUSD, c.Deadline, c.ParentRunID, optional(c.RerunOf))
}

// Chain is a chain's row as the coordinator reads it.
type Chain struct {
	ID, OrgID, TraceID, JobType, Status string
	Definition, Input                   json.RawMessage
	UserID, Priority, ParentRunID       string
	CreatedAt                           time.Time
	DeadlineAt                          *time.Time
	Error                               json.RawMessage
	CostUSD                             float64
	RerunOf                             string
}

// ChainStep is one row of chain_steps, with its run's live status and job type.
type ChainStep struct {
	StepID     string
	Instance   int
	Status     string
	RunID      string
	Attempt    int
	Instances  *int
	Reason     string
	Reused     bool
	SpanID     string
	Output     json.RawMessage
	Error      json.RawMessage
	CostUSD    float64
	RunStatus  string
	StartedAt  *time.Time
	FinishedAt *time.Time
	RunJobType string
}

// LockChain takes the chain's transaction lock and reads it with its steps. Call it on a
// store made on a transaction (InTx): the lock is held until that transaction ends.
func (s *Store) LockChain(ctx context.Context, chainID string) (Chain, []ChainStep, error) {
	var c Chain
	var steps []ChainStep
	found := false
	b := &pgx.Batch{}
	// Both reads in one round trip; the first takes the lock, so the second reads the
	// steps as the lock holder sees them.
	b.Queue(lockChainSQL, chainID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&c.ID, &c.OrgID, &c.TraceID, &c.JobType, &c.Status, &c.Definition, &c.Input, &c.UserID,
			&c.Priority, &c.ParentRunID, &c.CreatedAt, &c.DeadlineAt, &c.Error, &c.CostUSD, &c.RerunOf)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	b.Queue(chainStepsSQL, chainID).Query(func(rows pgx.Rows) error {
		var err error
		steps, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ChainStep])
		return err
	})
	if err := s.SendBatch(ctx, b); err != nil {
		return c, nil, fmt.Errorf("locking chain %s: %w", chainID, err)
	}
	if !found {
		return c, nil, ErrChainNotFound
	}
	return c, steps, nil
}

func (s *Store) chainSteps(ctx context.Context, chainID string) ([]ChainStep, error) {
	rows, err := s.db.Query(ctx, chainStepsSQL, chainID)
	if err != nil {
		return nil, fmt.Errorf("reading steps of chain %s: %w", chainID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ChainStep])
}

// SaveChainSteps inserts or updates step rows of a chain in one statement.
func (s *Store) SaveChainSteps(ctx context.Context, chainID string, steps []ChainStep) error {
	if len(steps) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	QueueChainSteps(b, chainID, steps)
	if err := s.SendBatch(ctx, b); err != nil {
		return fmt.Errorf("saving steps of chain %s: %w", chainID, err)
	}
	return nil
}

// QueueChainSteps adds SaveChainSteps' statement to a batch (nothing for no steps).
func QueueChainSteps(b *pgx.Batch, chainID string, steps []ChainStep) {
	if len(steps) == 0 {
		return
	}
	n := len(steps)
	stepID, status, reason := make([]string, n), make([]string, n), make([]string, n)
	instance, attempt, instances := make([]int32, n), make([]int32, n), make([]*int32, n)
	runID, spanID := make([]*string, n), make([]*string, n)
	reused := make([]bool, n)
	output, errs := make([]*string, n), make([]*string, n)
	cost := make([]float64, n)
	started, finished := make([]*time.Time, n), make([]*time.Time, n)
	for i, st := range steps {
		stepID[i], status[i], reason[i] = st.StepID, st.Status, st.Reason
		instance[i], attempt[i] = int32(st.Instance), int32(st.Attempt)
		if st.Instances != nil {
			v := int32(*st.Instances)
			instances[i] = &v
		}
		runID[i], spanID[i], reused[i] = optional(st.RunID), optional(st.SpanID), st.Reused
		output[i], errs[i] = optionalJSON(st.Output), optionalJSON(st.Error)
		cost[i], started[i], finished[i] = st.CostUSD, st.StartedAt, st.FinishedAt
	}
	b.Queue(saveChainStepsSQL, chainID, stepID, instance, status, runID, attempt, instances,
		reason, reused, spanID, output, errs, cost, started, finished)
}

func optionalJSON(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// QueueUpdateChain adds the update of a chain's status, error and cost after a transition
// to a batch.
func QueueUpdateChain(b *pgx.Batch, chainID, status string, errBody json.RawMessage, cost float64) {
	b.Queue(updateChainSQL, chainID, status, optionalJSON(errBody), cost)
}

// StepEnd is how a chain step's run stands, as the coordinator reads it when it is told
// the run ended.
type StepEnd struct {
	ChainID, Status string
	Output, Error   json.RawMessage
	CostUSD         float64
}

// StepRunEnd reads a step run's chain, status, output, error and cost.
func (s *Store) StepRunEnd(ctx context.Context, runID string) (StepEnd, error) {
	var e StepEnd
	err := s.db.QueryRow(ctx, stepRunEndSQL, runID).Scan(&e.ChainID, &e.Status, &e.Output, &e.Error, &e.CostUSD)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// PendingSteps counts a chain's steps (and for_each instances) not yet dispatched: what
// remains of it after the steps under way (the router's "remaining" queue order).
func (s *Store) PendingSteps(ctx context.Context, chainID string) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, pendingStepsSQL, chainID).Scan(&n)
	return n, err
}

// ChainView is a chain as GET /api/v1/chains/{id} shows it (its steps from ChainSteps).
type ChainView struct {
	ID, JobID, JobType, TraceID, Status string
	Definition, Input                   json.RawMessage
	CostUSD                             float64
	CostCeilingUSD                      *float64
	RerunOf                             string
	Error                               json.RawMessage
	CreatedAt                           time.Time
	DeadlineAt, FinishedAt              *time.Time
	Steps                               []ChainStep
}

// GetChain reads one of the organisation's chains with its steps.
func (s *Store) GetChain(ctx context.Context, orgID, chainID string) (ChainView, error) {
	var v ChainView
	err := s.db.QueryRow(ctx, getChainSQL, chainID, orgID).Scan(&v.ID, &v.JobID, &v.JobType, &v.TraceID, &v.Status,
		&v.Definition, &v.Input, &v.CostUSD, &v.CostCeilingUSD, &v.RerunOf, &v.Error, &v.CreatedAt, &v.DeadlineAt, &v.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ErrChainNotFound
	}
	if err != nil {
		return v, fmt.Errorf("reading chain %s: %w", chainID, err)
	}
	v.Steps, err = s.chainSteps(ctx, chainID)
	return v, err
}

// ChainListFilter selects chains for ListChains.
type ChainListFilter struct {
	Status, JobType string
	// AfterCreated and AfterID are the keyset cursor: chains created before it.
	AfterCreated *time.Time
	AfterID      string
	Limit        int
}

// ChainSummary is one chain of a list.
type ChainSummary struct {
	ID, JobID, JobType, Status string
	Definition                 json.RawMessage
	CostUSD                    float64
	RerunOf                    string
	CreatedAt                  time.Time
	FinishedAt                 *time.Time
	StepsEnded                 int
}

// ListChains returns the organisation's chains, newest first.
func (s *Store) ListChains(ctx context.Context, orgID string, f ChainListFilter) ([]ChainSummary, error) {
	rows, err := s.db.Query(ctx, listChainsSQL, orgID, f.Status, f.JobType, f.AfterCreated, nullUUID(f.AfterID), f.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing chains: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ChainSummary])
}

// ChainRepair is something the reconciler tells the coordinator about: Kind step_done (a
// step run's end never reached it; RunID the step's run), timeout (a running chain past its
// deadline) or start (a chain whose start was lost; RunID its parent).
type ChainRepair struct {
	Kind, ChainID, RunID string
}

// ChainsToRepair returns up to 500 chains the coordinator has to be told about again.
func (s *Store) ChainsToRepair(ctx context.Context, grace time.Duration) ([]ChainRepair, error) {
	rows, err := s.db.Query(ctx, chainsToRepairSQL, grace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("finding chains to repair: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ChainRepair])
}

// DeleteChain removes a chain that never started — its start could not be enqueued — with
// its runs, spans and events.
func (s *Store) DeleteChain(ctx context.Context, orgID, chainID string) error {
	_, err := s.db.Exec(ctx, deleteChainSQL, chainID, orgID)
	return err
}
