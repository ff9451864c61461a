package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Journaled decodes into dst the replay-journal entry of the run's step and returns when it
// was written; ok is false when the step has none.
func (s *Store) Journaled(ctx context.Context, runID, step string, dst any) (at time.Time, ok bool, err error) {
	var raw []byte
	err = s.db.QueryRow(ctx, journaledSQL, runID, step).Scan(&raw, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, false, nil
	}
	if err != nil {
		return at, false, fmt.Errorf("reading journal step %s: %w", step, err)
	}
	return at, true, json.Unmarshal(raw, dst)
}

// Journal appends an entry of kind (llm_answer, tool_result, decision, note) under the
// run's step. It reports false when the step was journaled already (by an earlier
// attempt), in which case nothing was written.
func (s *Store) Journal(ctx context.Context, runID, step, kind string, data any) (bool, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return false, err
	}
	tag, err := s.db.Exec(ctx, appendJournalSQL, runID, step, kind, raw)
	if err != nil {
		return false, fmt.Errorf("journaling step %s: %w", step, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Usage is what one LLM answer cost.
type Usage struct {
	TokensIn, TokensOut, TokensCached int64
	CostUSD                           float64
}

// Totals are a run's running billing totals.
type Totals struct {
	TokensIn  int64   `json:"tokens_in"`
	TokensOut int64   `json:"tokens_out"`
	CostUSD   float64 `json:"cost_usd"`
	LLMCalls  int     `json:"llm_calls"`
}

// JournalLLMAnswer journals a paid LLM answer (entry, already encoded) under the run's step
// and adds its usage to the run's totals, in one statement, and returns the new totals. When
// the step was journaled already (by an attempt racing this one) nothing is written or
// added twice, and ok is false.
func (s *Store) JournalLLMAnswer(ctx context.Context, runID, step string, u Usage, entry []byte) (t Totals, ok bool, err error) {
	err = s.db.QueryRow(ctx, journalLlmAnswerSQL, runID, u.TokensIn, u.TokensOut, u.TokensCached, u.CostUSD, step, entry).
		Scan(&t.TokensIn, &t.TokensOut, &t.CostUSD, &t.LLMCalls)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	return t, true, nil
}
