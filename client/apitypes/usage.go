package apitypes

import "time"

// Usage is the organisation's token use and cost over a period (GET /api/v1/admin/usage):
// totals, breakdowns by skill, provider, model and user, daily series of each, and the
// current calendar month against the organisation's quota. (Members in alphabetical order,
// as the answer has them.)
type Usage struct {
	// BySkillAndModel is what each skill consumed with each model.
	BySkillAndModel []SkillUsage `json:"bySkillAndModel"`
	// ByDay is the period's totals per UTC day (key empty), days without calls left out.
	ByDay []UsagePoint `json:"byDay"`
	// ByModel's keys are "provider/model".
	ByModel    []UsageShare `json:"byModel"`
	ByProvider []UsageShare `json:"byProvider"`
	// BySkill is largest cost first: the top skills.
	BySkill []UsageShare `json:"bySkill"`
	// ByUser holds the Users users of largest cost (key "" is calls without a user);
	// UsersTotal says how many there were.
	ByUser  []UsageShare `json:"byUser"`
	Calls   int64        `json:"calls"`
	CostUSD float64      `json:"costUsd"`
	// Daily holds the same breakdowns per UTC day, for charts.
	Daily UsageDaily `json:"daily"`
	// From and To bound the period: From <= call time < To.
	From time.Time `json:"from"`
	// Month is YYYY-MM when the period is a calendar month asked for with month=, else "".
	Month string `json:"month"`
	// MonthlyTokenQuota is the organisation's quota, nil when unlimited.
	MonthlyTokenQuota *int64 `json:"monthlyTokenQuota"`
	// Pseudonymised says user ids are keyed pseudonyms (pseudonymise=true).
	Pseudonymised bool `json:"pseudonymised"`
	// ThisMonth is the current calendar month (UTC), whatever the period.
	ThisMonth    UsageMonth `json:"thisMonth"`
	To           time.Time  `json:"to"`
	Tokens       int64      `json:"tokens"`
	TokensCached int64      `json:"tokensCached"`
	TokensIn     int64      `json:"tokensIn"`
	TokensOut    int64      `json:"tokensOut"`
	// UnknownCalls were cut off at the provider (ledger outcome unknown): billed there
	// perhaps, 0 tokens and cost here.
	UnknownCalls int64 `json:"unknownCalls"`
	UsersTotal   int64 `json:"usersTotal"`
}

// SkillUsage is what one skill (and model) consumed in the period.
type SkillUsage struct {
	JobType string  `json:"jobType"`
	Model   string  `json:"model,omitempty"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUsd"`
	Calls   int64   `json:"calls"`
}

// UsageAmount is what a group of LLM calls consumed. Tokens is TokensIn + TokensOut.
type UsageAmount struct {
	Tokens       int64   `json:"tokens"`
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
	Calls        int64   `json:"calls"`
	UnknownCalls int64   `json:"unknownCalls"`
}

// UsageShare is what the calls of one skill, provider, model or user consumed.
type UsageShare struct {
	Key string `json:"key"`
	UsageAmount
}

// UsagePoint is what the calls of one key consumed on one UTC day (YYYY-MM-DD).
type UsagePoint struct {
	Day string `json:"day"`
	Key string `json:"key"`
	UsageAmount
}

// UsageDaily holds the daily series by skill, provider, model and user (the users of
// Usage.ByUser only).
type UsageDaily struct {
	Model    []UsagePoint `json:"model"`
	Provider []UsagePoint `json:"provider"`
	Skill    []UsagePoint `json:"skill"`
	User     []UsagePoint `json:"user"`
}

// UsageMonth is the current calendar month against the organisation's limits.
type UsageMonth struct {
	CostUSD float64 `json:"costUsd"`
	Month   string  `json:"month"`
	// MonthlyBudgetUSD is the organisation's monthly cost budget, nil when it has none.
	MonthlyBudgetUSD *float64 `json:"monthlyBudgetUsd"`
	// MonthlyTokenQuota is nil when unlimited.
	MonthlyTokenQuota *int64 `json:"monthlyTokenQuota"`
	// Tokens is the quota's counter: what governance compares with the quota.
	Tokens int64 `json:"tokens"`
}

// AuditRecord is one LLM call in the audit export (GET /api/v1/admin/audit, one JSON
// line each): seed 004 §10.2's record.
type AuditRecord struct {
	// ID is the usage ledger row's id: increasing with time of writing, unique.
	ID      int64  `json:"id"`
	OrgID   string `json:"orgId"`
	UserID  string `json:"userId"`
	JobID   string `json:"jobId,omitempty"`
	ChainID string `json:"chainId,omitempty"`
	JobType string `json:"jobType"`
	// SpanID is the run's llm_call span of the call (its step), for drill-down; empty for
	// calls without a run or step.
	SpanID   string `json:"spanId,omitempty"`
	StepKey  string `json:"stepKey,omitempty"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Outcome is answered or unknown (the router died while the call was at the provider).
	Outcome      string  `json:"outcome"`
	TokensIn     int64   `json:"tokensIn"`
	TokensOut    int64   `json:"tokensOut"`
	TokensCached int64   `json:"tokensCached"`
	CostUSD      float64 `json:"costUsd"`
	// StartedAt is EndedAt less the call's latency; EndedAt is when the router recorded it.
	StartedAt   time.Time `json:"startedAt"`
	EndedAt     time.Time `json:"endedAt"`
	LatencyMS   int64     `json:"latencyMs"`
	QueueWaitMS int64     `json:"queueWaitMs"`
}
