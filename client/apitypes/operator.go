package apitypes

import "time"

// OrgCreate is the body of POST /api/v1/operator/orgs: a new organisation. Unset limits
// take the platform's defaults (orgRpm 6000, userRpm 600, maxBacklog 10000, no token quota,
// no cost budget).
type OrgCreate struct {
	// Slug names the organisation in URLs and the CLI: ^[a-z0-9][a-z0-9-]{1,62}$, unique.
	Slug string `json:"slug" validate:"required,orgslug"`
	Name string `json:"name" validate:"required,min=1,max=200"`
	// Jurisdiction is eu, us or other: where the organisation's data may be processed.
	Jurisdiction         string   `json:"jurisdiction" validate:"required,oneof=eu us other"`
	OrgRPM               *int     `json:"orgRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	UserRPM              *int     `json:"userRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	MonthlyTokenQuota    *int64   `json:"monthlyTokenQuota,omitempty" validate:"omitempty,min=0"`
	MonthlyCostBudgetUSD *float64 `json:"monthlyCostBudgetUsd,omitempty" validate:"omitempty,min=0,max=1000000000"`
	MaxBacklog           *int     `json:"maxBacklog,omitempty" validate:"omitempty,min=0,max=100000000"`
}

// OperatorOrgPatch is the body of PATCH /api/v1/operator/orgs/{org}: what an operator sets
// on an organisation. Nil fields stay as they are.
type OperatorOrgPatch struct {
	Name                 *string  `json:"name,omitempty" validate:"omitempty,min=1,max=200"`
	Jurisdiction         *string  `json:"jurisdiction,omitempty" validate:"omitempty,oneof=eu us other"`
	OrgRPM               *int     `json:"orgRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	UserRPM              *int     `json:"userRpm,omitempty" validate:"omitempty,min=0,max=10000000"`
	MonthlyTokenQuota    *int64   `json:"monthlyTokenQuota,omitempty" validate:"omitempty,min=0"`
	ClearTokenQuota      bool     `json:"clearTokenQuota,omitempty"`
	MonthlyCostBudgetUSD *float64 `json:"monthlyCostBudgetUsd,omitempty" validate:"omitempty,min=0,max=1000000000"`
	// ClearCostBudget removes the monthly cost budget.
	ClearCostBudget bool `json:"clearCostBudget,omitempty"`
	MaxBacklog      *int `json:"maxBacklog,omitempty" validate:"omitempty,min=0,max=100000000"`
}

// OrgSuspend is the body of POST /api/v1/operator/orgs/{org}/suspend.
type OrgSuspend struct {
	// Reason is recorded with the suspension and shown to the organisation's callers.
	Reason string `json:"reason" validate:"required,min=1,max=500"`
}

// OrgSuspended is the answer to a suspension: the organisation, and what happened to its
// unfinished work. (Members in alphabetical order, as the answer has them.)
type OrgSuspended struct {
	// Cancelled counts runs that were queued, held for review or paused for approval, and
	// chains, now cancelled.
	Cancelled int `json:"cancelled"`
	// CancelRequested counts running runs given a cancellation request, as a cancel of
	// each would: they end cancelled once the executor sees it.
	CancelRequested int `json:"cancelRequested"`
	Org             Org `json:"org"`
}

// OrgAuditEntry is one thing an operator did to an organisation.
type OrgAuditEntry struct {
	// Action is create, update, suspend, resume or admin_key.
	Action string         `json:"action"`
	Actor  string         `json:"actor"`
	Reason string         `json:"reason,omitempty"`
	Detail map[string]any `json:"detail"`
	At     time.Time      `json:"at"`
}

// OrgDetail is an organisation as an operator sees it (GET /api/v1/operator/orgs/{org}):
// its settings and what operators did to it, oldest first.
type OrgDetail struct {
	Org
	Audit []OrgAuditEntry `json:"audit"`
}

// AdminKeyCreate is the body of POST /api/v1/operator/orgs/{org}/admin-keys.
type AdminKeyCreate struct {
	// Name names the key; default "admin".
	Name string `json:"name,omitempty" validate:"omitempty,min=1,max=100"`
}
