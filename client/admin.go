package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// SkillSpec is what a caller sets on a skill binding: the body of PUT
// /api/v1/skills/{job_type}. Field names are those of the YAML files in skills/.
type SkillSpec struct {
	JobType string `json:"job_type"`
	// Enabled is sent as is: a zero SkillSpec binds a disabled skill.
	Enabled       bool     `json:"enabled"`
	Description   string   `json:"description,omitempty"`
	ExecutionType string   `json:"execution_type"`
	RoutingHint   string   `json:"routing_hint,omitempty"`
	ModelOverride string   `json:"model_override,omitempty"`
	SystemPrompt  string   `json:"system_prompt,omitempty"`
	Tools         []string `json:"tools,omitempty"`
	MaxIterations int      `json:"max_iterations,omitempty"`
	MaxTokens     int      `json:"max_tokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TimeoutSecs   *int     `json:"timeout_seconds,omitempty"`
	MaxRetries    *int     `json:"max_retries,omitempty"`
	Queue         string   `json:"queue,omitempty"`
	// RiskLevel is minimal, limited, high or critical.
	RiskLevel        string `json:"risk_level,omitempty"`
	RequiresApproval bool   `json:"requires_approval,omitempty"`
	// DataResidency is any, eu_only or us_only.
	DataResidency  string          `json:"data_residency,omitempty"`
	CostCeilingUSD *float64        `json:"cost_ceiling_usd,omitempty"`
	Chain          json.RawMessage `json:"chain,omitempty"`
	Autonomous     json.RawMessage `json:"autonomous,omitempty"`
	// Workflow is a chain skill written as a workflow file (GitHub Actions syntax), as
	// written; a chain skill has Chain or Workflow.
	Workflow string `json:"workflow,omitempty"`
}

// Skill is a stored binding: its spec plus the registry's bookkeeping.
type Skill struct {
	SkillSpec
	ID        string    `json:"id,omitempty"`
	OrgID     string    `json:"org_id,omitempty"`
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by,omitempty"`
}

// SkillChange is one entry of a skill's history.
type SkillChange struct {
	Version int `json:"version"`
	// Action is create, update, disable or enable.
	Action    string          `json:"action"`
	ChangedBy string          `json:"changed_by"`
	ChangedAt time.Time       `json:"changed_at"`
	Snapshot  json.RawMessage `json:"snapshot"`
}

// SkillsService administers skill bindings; reading needs any role, changing needs
// skills_admin.
type SkillsService struct{ c *Client }

func skillPath(jobType string) string { return "/api/v1/skills/" + pathEscape(jobType) }

// List returns the organisation's bindings; q, when set, filters them.
func (s *SkillsService) List(ctx context.Context, q string) ([]Skill, error) {
	var query url.Values
	if q != "" {
		query = url.Values{"q": {q}}
	}
	var out list[Skill]
	err := s.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/skills", query: query, retryable: true}, &out)
	return out.items, err
}

// Get returns one binding.
func (s *SkillsService) Get(ctx context.Context, jobType string) (Skill, error) {
	var sk Skill
	err := s.c.do(ctx, request{method: http.MethodGet, path: skillPath(jobType), retryable: true}, &sk)
	return sk, err
}

// Put creates or replaces the binding of spec.JobType; created is true when it did not
// exist before.
func (s *SkillsService) Put(ctx context.Context, spec SkillSpec) (sk Skill, created bool, err error) {
	var status int
	err = s.c.do(ctx, request{method: http.MethodPut, path: skillPath(spec.JobType), body: spec,
		retryable: true, okStatus: &status}, &sk)
	return sk, status == http.StatusCreated, err
}

// Enable enables a binding.
func (s *SkillsService) Enable(ctx context.Context, jobType string) (Skill, error) {
	var sk Skill
	err := s.c.do(ctx, request{method: http.MethodPost, path: skillPath(jobType) + "/enable", retryable: true}, &sk)
	return sk, err
}

// Disable disables a binding: new dispatches of its job type answer SKILL_NOT_FOUND.
func (s *SkillsService) Disable(ctx context.Context, jobType string) (Skill, error) {
	var sk Skill
	err := s.c.do(ctx, request{method: http.MethodPost, path: skillPath(jobType) + "/disable", retryable: true}, &sk)
	return sk, err
}

// History returns every change of a binding with who made it and when, newest first.
func (s *SkillsService) History(ctx context.Context, jobType string) ([]SkillChange, error) {
	var out list[SkillChange]
	err := s.c.do(ctx, request{method: http.MethodGet, path: skillPath(jobType) + "/history", retryable: true}, &out)
	return out.items, err
}

// Key describes an API key; the secret is never shown after creation.
type Key = apitypes.Key

// CreatedKey is a new key with its plaintext, shown this once.
type CreatedKey struct {
	Key
	// Secret is the API key to send as Bearer; store it now.
	Secret string `json:"key"`
}

// UnmarshalJSON reads the answer of POST /api/v1/admin/keys ({"key", "info": {...}}) and
// the flat form CreatedKey marshals to.
func (k *CreatedKey) UnmarshalJSON(b []byte) error {
	var outer struct {
		Secret string `json:"key"`
		Info   *Key   `json:"info"`
	}
	if err := json.Unmarshal(b, &outer); err != nil {
		return err
	}
	k.Secret = outer.Secret
	if outer.Info != nil {
		k.Key = *outer.Info
		return nil
	}
	return json.Unmarshal(b, &k.Key)
}

// KeysService administers the organisation's API keys (role admin).
type KeysService struct{ c *Client }

// Create makes a key with the roles (dispatch, approve, skills_admin, viewer, admin).
func (k *KeysService) Create(ctx context.Context, name string, roles ...string) (CreatedKey, error) {
	var out CreatedKey
	err := k.c.do(ctx, request{method: http.MethodPost, path: "/api/v1/admin/keys",
		body: apitypes.KeyCreate{Name: name, Roles: roles}}, &out)
	return out, err
}

// List returns the organisation's keys, revoked ones included, without secrets.
func (k *KeysService) List(ctx context.Context) ([]Key, error) {
	var out list[Key]
	err := k.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/keys", retryable: true}, &out)
	return out.items, err
}

// Revoke revokes a key by id; requests with it fail from then on.
func (k *KeysService) Revoke(ctx context.Context, id string) error {
	return k.c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/admin/keys/" + pathEscape(id), retryable: true}, nil)
}

// Queue is a named queue of the platform.
type Queue = apitypes.Queue

// QueuesService administers the named queues (role admin; platform-wide).
type QueuesService struct{ c *Client }

// List returns every named queue.
func (q *QueuesService) List(ctx context.Context) ([]Queue, error) {
	var out list[Queue]
	err := q.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/queues", retryable: true}, &out)
	return out.items, err
}

// Put creates or changes the queue named q.Name.
func (q *QueuesService) Put(ctx context.Context, queue Queue) (Queue, error) {
	body := map[string]any{"class": queue.Class, "concurrency": queue.Concurrency, "timeoutSeconds": queue.TimeoutSeconds}
	if queue.Description != "" {
		body["description"] = queue.Description
	}
	var out Queue
	err := q.c.do(ctx, request{method: http.MethodPut, path: "/api/v1/admin/queues/" + pathEscape(queue.Name),
		body: body, retryable: true}, &out)
	return out, err
}

// Org is the organisation's settings.
type Org = apitypes.Org

// OrgPatch changes some of the organisation's settings; nil fields stay as they are.
type OrgPatch = apitypes.OrgPatch

// OrgService reads and changes the organisation (role admin).
type OrgService struct{ c *Client }

// Get returns the organisation's settings.
func (o *OrgService) Get(ctx context.Context) (Org, error) {
	var org Org
	err := o.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/org", retryable: true}, &org)
	return org, err
}

// Update applies a patch and returns the settings after it.
func (o *OrgService) Update(ctx context.Context, p OrgPatch) (Org, error) {
	var org Org
	err := o.c.do(ctx, request{method: http.MethodPatch, path: "/api/v1/admin/org", body: p, retryable: true}, &org)
	return org, err
}

// Usage is the organisation's token use and cost in a month.
type Usage = apitypes.Usage

// SkillUsage is what one skill (and model) consumed in the month.
type SkillUsage = apitypes.SkillUsage

// Usage returns the tokens and cost of month (YYYY-MM; empty means the current month).
func (o *OrgService) Usage(ctx context.Context, month string) (Usage, error) {
	var query url.Values
	if month != "" {
		query = url.Values{"month": {month}}
	}
	var u Usage
	err := o.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/usage", query: query, retryable: true}, &u)
	return u, err
}
