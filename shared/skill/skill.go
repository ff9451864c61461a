// Package skill is the binding of a job type to how it runs — the contract the dispatcher
// resolves at dispatch and the executor re-resolves at pickup — with its registry queries
// and the YAML form of the catalogue in skills/.
package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Skill is one binding. Its JSON form is the snapshot stored with every run and the body
// of the admin API; its YAML form is a file in skills/.
type Skill struct {
	ID               string          `json:"id,omitempty" yaml:"-"`
	OrgID            string          `json:"org_id,omitempty" yaml:"-"`
	JobType          string          `json:"job_type" yaml:"job_type" validate:"required,max=128,jobtype"`
	Version          int             `json:"version" yaml:"-"`
	Enabled          bool            `json:"enabled" yaml:"enabled"`
	Description      string          `json:"description" yaml:"description" validate:"max=2000"`
	ExecutionType    string          `json:"execution_type" yaml:"execution_type" validate:"required,oneof=llm_only tool_using chain autonomous"`
	RoutingHint      string          `json:"routing_hint" yaml:"routing_hint" validate:"omitempty,oneof=fast reasoning code long_context creative default"`
	ModelOverride    string          `json:"model_override" yaml:"model_override" validate:"max=200"`
	SystemPrompt     string          `json:"system_prompt" yaml:"system_prompt" validate:"max=100000"`
	Tools            []string        `json:"tools" yaml:"tools" validate:"max=64,dive,min=1,max=64"`
	MaxIterations    int             `json:"max_iterations" yaml:"max_iterations" validate:"omitempty,min=1,max=1000"`
	MaxTokens        int             `json:"max_tokens" yaml:"max_tokens" validate:"omitempty,min=1,max=1000000"`
	Temperature      *float64        `json:"temperature,omitempty" yaml:"temperature" validate:"omitempty,min=0,max=2"`
	TimeoutSeconds   *int            `json:"timeout_seconds,omitempty" yaml:"timeout_seconds" validate:"omitempty,min=1,max=604800"`
	MaxRetries       *int            `json:"max_retries,omitempty" yaml:"max_retries" validate:"omitempty,min=0,max=50"`
	Queue            string          `json:"queue" yaml:"queue" validate:"omitempty,max=63"`
	RiskLevel        string          `json:"risk_level" yaml:"risk_level" validate:"omitempty,oneof=minimal limited high critical"`
	RequiresApproval bool            `json:"requires_approval" yaml:"requires_approval"`
	DataResidency    string          `json:"data_residency" yaml:"data_residency" validate:"omitempty,oneof=any eu_only us_only"`
	CostCeilingUSD   *float64        `json:"cost_ceiling_usd,omitempty" yaml:"cost_ceiling_usd" validate:"omitempty,min=0,max=99999999"` // numeric(14, 6)
	Chain            json.RawMessage `json:"chain,omitempty" yaml:"-"`
	// Workflow is a chain skill written as a workflow file in GitHub Actions syntax (the
	// file as written), instead of a Chain block.
	Workflow   string          `json:"workflow,omitempty" yaml:"-"`
	Autonomous json.RawMessage `json:"autonomous,omitempty" yaml:"-"`
	UpdatedAt  time.Time       `json:"updated_at" yaml:"-"`
	UpdatedBy  string          `json:"updated_by,omitempty" yaml:"-"`
}

// Callable reports whether a chain's or a workflow's step may dispatch the skill: it is
// enabled and not itself a chain (chains do not nest).
func (s Skill) Callable() bool { return s.Enabled && s.ExecutionType != "chain" }

// Defaults fills the fields a binding may leave out.
func (s *Skill) Defaults() {
	if s.RoutingHint == "" {
		s.RoutingHint = "default"
	}
	if s.MaxIterations == 0 {
		s.MaxIterations = 5
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = 1024
	}
	if s.Queue == "" {
		s.Queue = "default"
	}
	if s.RiskLevel == "" {
		s.RiskLevel = "minimal"
	}
	if s.DataResidency == "" {
		s.DataResidency = "any"
	}
	if s.Tools == nil {
		s.Tools = []string{}
	}
	if s.MaxRetries == nil {
		three := 3
		s.MaxRetries = &three
	}
}

// ErrNotFound is returned when an organisation has no skill for a job type.
var ErrNotFound = errors.New("skill not found")

// DB is what the registry queries need of a pool or a transaction.
type DB = postgres.Querier

const columns = `id, org_id, job_type, version, enabled, description, execution_type, routing_hint,
	model_override, system_prompt, tools, max_iterations, max_tokens, temperature, timeout_seconds,
	max_retries, queue, risk_level, requires_approval, data_residency, cost_ceiling_usd::float8,
	chain, autonomous, COALESCE(workflow, ''), updated_at, updated_by`

func scan(row pgx.Row) (Skill, error) {
	var s Skill
	var maxRetries int
	err := row.Scan(&s.ID, &s.OrgID, &s.JobType, &s.Version, &s.Enabled, &s.Description, &s.ExecutionType,
		&s.RoutingHint, &s.ModelOverride, &s.SystemPrompt, &s.Tools, &s.MaxIterations, &s.MaxTokens,
		&s.Temperature, &s.TimeoutSeconds, &maxRetries, &s.Queue, &s.RiskLevel, &s.RequiresApproval,
		&s.DataResidency, &s.CostCeilingUSD, &s.Chain, &s.Autonomous, &s.Workflow, &s.UpdatedAt, &s.UpdatedBy)
	s.MaxRetries = &maxRetries
	return s, err
}

// Get returns the organisation's binding for jobType, enabled or not.
func Get(ctx context.Context, db DB, orgID, jobType string) (Skill, error) {
	s, err := scan(db.QueryRow(ctx, `SELECT `+columns+` FROM skills WHERE org_id = $1 AND job_type = $2`, orgID, jobType))
	if errors.Is(err, pgx.ErrNoRows) {
		return Skill{}, ErrNotFound
	}
	if err != nil {
		return Skill{}, fmt.Errorf("reading skill %q: %w", jobType, err)
	}
	return s, nil
}

// List returns every binding of an organisation, by job type.
func List(ctx context.Context, db DB, orgID string) ([]Skill, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM skills WHERE org_id = $1 ORDER BY job_type`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing skills: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Skill, error) { return scan(r) })
}

// Action is what Put did.
type Action string

// The actions recorded in a skill's history.
const (
	Created   Action = "create"
	Updated   Action = "update"
	Disabled  Action = "disable"
	Enabled   Action = "enable"
	Unchanged Action = "unchanged"
)

// Put creates or replaces the organisation's binding for s.JobType and records the change
// in the skill's history with who made it. A binding equal to the stored one is left alone.
// Run it inside a transaction so the binding and its history change together.
func Put(ctx context.Context, db DB, orgID string, s Skill, by string) (Skill, Action, error) {
	s.Defaults()
	old, err := Get(ctx, db, orgID, s.JobType)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Skill{}, "", err
	case sameBinding(old, s):
		return old, Unchanged, nil
	}
	action := Created
	if err == nil {
		action = Updated
		if old.Enabled && !s.Enabled {
			action = Disabled
		} else if !old.Enabled && s.Enabled {
			action = Enabled
		}
	}
	saved, err := scan(db.QueryRow(ctx, `INSERT INTO skills (org_id, job_type, enabled, description, execution_type,
			routing_hint, model_override, system_prompt, tools, max_iterations, max_tokens, temperature,
			timeout_seconds, max_retries, queue, risk_level, requires_approval, data_residency,
			cost_ceiling_usd, chain, autonomous, updated_by, workflow)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			NULLIF($23, ''))
		ON CONFLICT (org_id, job_type) DO UPDATE SET version = skills.version + 1, enabled = EXCLUDED.enabled,
			description = EXCLUDED.description, execution_type = EXCLUDED.execution_type,
			routing_hint = EXCLUDED.routing_hint, model_override = EXCLUDED.model_override,
			system_prompt = EXCLUDED.system_prompt, tools = EXCLUDED.tools,
			max_iterations = EXCLUDED.max_iterations, max_tokens = EXCLUDED.max_tokens,
			temperature = EXCLUDED.temperature, timeout_seconds = EXCLUDED.timeout_seconds,
			max_retries = EXCLUDED.max_retries, queue = EXCLUDED.queue, risk_level = EXCLUDED.risk_level,
			requires_approval = EXCLUDED.requires_approval, data_residency = EXCLUDED.data_residency,
			cost_ceiling_usd = EXCLUDED.cost_ceiling_usd, chain = EXCLUDED.chain,
			autonomous = EXCLUDED.autonomous, workflow = EXCLUDED.workflow, updated_by = EXCLUDED.updated_by,
			updated_at = now()
		RETURNING `+columns,
		orgID, s.JobType, s.Enabled, s.Description, s.ExecutionType, s.RoutingHint, s.ModelOverride,
		s.SystemPrompt, s.Tools, s.MaxIterations, s.MaxTokens, s.Temperature, s.TimeoutSeconds, *s.MaxRetries,
		s.Queue, s.RiskLevel, s.RequiresApproval, s.DataResidency, s.CostCeilingUSD, nullJSON(s.Chain),
		nullJSON(s.Autonomous), by, s.Workflow))
	if err != nil {
		return Skill{}, "", fmt.Errorf("saving skill %q: %w", s.JobType, err)
	}
	snapshot, err := json.Marshal(saved)
	if err != nil {
		return Skill{}, "", err
	}
	if _, err := db.Exec(ctx, `INSERT INTO skill_history (skill_id, org_id, job_type, version, action, snapshot, changed_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, saved.ID, orgID, saved.JobType, saved.Version, action, snapshot, by); err != nil {
		return Skill{}, "", fmt.Errorf("recording history of skill %q: %w", s.JobType, err)
	}
	return saved, action, nil
}

// Change is one entry of a skill's history.
type Change struct {
	Version   int             `json:"version"`
	Action    Action          `json:"action"`
	ChangedBy string          `json:"changed_by"`
	ChangedAt time.Time       `json:"changed_at"`
	Snapshot  json.RawMessage `json:"snapshot"`
}

// History returns the changes of an organisation's binding, newest first.
func History(ctx context.Context, db DB, orgID, jobType string) ([]Change, error) {
	rows, err := db.Query(ctx, `SELECT version, action, changed_by, changed_at, snapshot FROM skill_history
		WHERE org_id = $1 AND job_type = $2 ORDER BY id DESC`, orgID, jobType)
	if err != nil {
		return nil, fmt.Errorf("reading history of skill %q: %w", jobType, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Change])
}

// sameBinding compares the fields a caller sets.
func sameBinding(a, b Skill) bool {
	strip := func(s Skill) Skill {
		s.ID, s.OrgID, s.Version, s.UpdatedAt, s.UpdatedBy = "", "", 0, time.Time{}, ""
		return s
	}
	ja, _ := json.Marshal(strip(a))
	jb, _ := json.Marshal(strip(b))
	return string(ja) == string(jb)
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}
