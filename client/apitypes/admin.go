package apitypes

import "time"

// Key describes an API key; the secret is never shown after creation.
type Key struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Roles      []string   `json:"roles"`
	CreatedBy  string     `json:"createdBy"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
}

// KeyCreate is the body of POST /api/v1/admin/keys.
type KeyCreate struct {
	Name string `json:"name" validate:"required,min=1,max=100"`
	// Roles are dispatch, approve, skills_admin, viewer or admin.
	Roles []string `json:"roles" validate:"required,min=1,dive,oneof=dispatch approve skills_admin viewer admin"`
}

// OperatorKeyCreate is the body of POST /api/v1/operator/keys: another operator key.
type OperatorKeyCreate struct {
	Name string `json:"name" validate:"required,min=1,max=100"`
}

// KeyCreated is the answer to POST /api/v1/admin/keys: the key's plaintext, shown this
// once, and its description. (Members in alphabetical order, as the answer has them.)
type KeyCreated struct {
	Info Key    `json:"info"`
	Key  string `json:"key"`
	Note string `json:"note"`
}

// Org is the organisation's settings. (Fields in the order of the registry's columns.)
type Org struct {
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Name string `json:"name"`
	// Jurisdiction is eu, us or other: where the organisation's data may be processed.
	Jurisdiction string `json:"jurisdiction"`
	// OrgRPM and UserRPM are the dispatch rate limits per minute; 0 means unlimited.
	OrgRPM  int `json:"orgRpm"`
	UserRPM int `json:"userRpm"`
	// MonthlyTokenQuota is nil when unlimited.
	MonthlyTokenQuota *int64   `json:"monthlyTokenQuota"`
	PIIKeywords       []string `json:"piiKeywords"`
	CallbackAllowlist []string `json:"callbackAllowlist"`
	HTTPAllowlist     []string `json:"httpAllowlist"`
	// MaxBacklog caps the runs queued or running; beyond it a dispatch answers
	// BACKLOG_FULL. 0: no cap.
	MaxBacklog int       `json:"maxBacklog"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// SuspendedAt is set while a platform operator has suspended the organisation: every
	// dispatch answers 403 ORG_SUSPENDED. SuspendedBy and SuspendReason say who and why.
	SuspendedAt   *time.Time `json:"suspendedAt"`
	SuspendedBy   string     `json:"suspendedBy,omitempty"`
	SuspendReason string     `json:"suspendReason,omitempty"`
	// MonthlyCostBudgetUSD stops dispatching once this calendar month's (UTC) LLM cost has
	// reached it (429 COST_BUDGET_EXCEEDED); nil: no budget. Set by a platform operator.
	MonthlyCostBudgetUSD *float64  `json:"monthlyCostBudgetUsd"`
	CreatedBy            string    `json:"createdBy"`
	CreatedAt            time.Time `json:"createdAt"`
}

// OrgPatch changes some of the organisation's settings (PATCH /api/v1/admin/org); nil
// fields stay as they are.
type OrgPatch struct {
	Name              *string `json:"name,omitempty" validate:"omitempty,min=1,max=200"`
	Jurisdiction      *string `json:"jurisdiction,omitempty" validate:"omitempty,oneof=eu us other"`
	OrgRPM            *int    `json:"orgRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	UserRPM           *int    `json:"userRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	MonthlyTokenQuota *int64  `json:"monthlyTokenQuota,omitempty" validate:"omitempty,min=0"`
	// ClearTokenQuota removes the monthly token quota (unlimited).
	ClearTokenQuota   bool      `json:"clearTokenQuota,omitempty"`
	PIIKeywords       *[]string `json:"piiKeywords,omitempty" validate:"omitempty,max=1000,dive,min=1,max=100"`
	CallbackAllowlist *[]string `json:"callbackAllowlist,omitempty" validate:"omitempty,max=100,dive,min=1,max=255"`
	HTTPAllowlist     *[]string `json:"httpAllowlist,omitempty" validate:"omitempty,max=100,dive,min=1,max=255"`
	MaxBacklog        *int      `json:"maxBacklog,omitempty" validate:"omitempty,min=0,max=100000000"`
}

// Queue is a named queue of the platform.
type Queue struct {
	Name string `json:"name"`
	// Class is cpu or gpu: which executors consume it.
	Class          string    `json:"class"`
	Concurrency    int       `json:"concurrency"`
	TimeoutSeconds int       `json:"timeoutSeconds"`
	Description    string    `json:"description"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// Consumers is how many executor servers consume the queue now (listing only).
	Consumers *int `json:"consumers,omitempty"`
}
