package apitypes

import "time"

// ProviderTestJobType is the job type of a "Test connection" probe: an llm_only skill the
// admin API binds in the organisation on first use, whose runs the executor pins to the
// provider named in their payload (ProviderTestPayload; aichat.HeaderProvider).
const ProviderTestJobType = "switchyard.provider-test"

// ProviderTestPayload is a probe run's payload: a chat prompt and the provider to send it to.
type ProviderTestPayload struct {
	Prompt   string `json:"prompt"`
	Provider string `json:"provider"`
}

// Provider is one of an organisation's provider endpoints (GET /api/v1/admin/providers).
type Provider struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is openai, openrouter, openai_compatible, anthropic or gemini.
	Kind string `json:"kind"`
	// BaseURL is the endpoint; empty: the kind's default (required for openai_compatible).
	BaseURL string `json:"baseUrl"`
	// Jurisdiction is eu, us or global: where the endpoint processes data.
	Jurisdiction string `json:"jurisdiction"`
	// Models maps a role (a routing hint or "default") to a model, e.g.
	// {"default": "gpt-4o-mini", "reasoning": "o3"}.
	Models  map[string]string `json:"models"`
	Enabled bool              `json:"enabled"`
	// Credential describes the API key, never shows it; nil when none was set.
	Credential *CredentialInfo `json:"credential"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// ProviderSpec is the body of PUT /api/v1/admin/providers/{name}.
type ProviderSpec struct {
	Kind         string            `json:"kind" validate:"required,oneof=openai openrouter openai_compatible anthropic gemini"`
	BaseURL      string            `json:"baseUrl" validate:"omitempty,max=2048,httpurl"`
	Jurisdiction string            `json:"jurisdiction" validate:"omitempty,oneof=eu us global"`
	Models       map[string]string `json:"models" validate:"dive,keys,oneof=default fast reasoning code long_context creative,endkeys,required,max=200"`
	// Enabled defaults to true when absent.
	Enabled *bool `json:"enabled"`
}

// CredentialInfo is what may be shown of a stored credential: its last four characters and
// when and by whom it was set. The key itself is sealed for the router and never returned.
type CredentialInfo struct {
	Last4 string    `json:"last4"`
	SetAt time.Time `json:"setAt"`
	SetBy string    `json:"setBy"`
	// Scheme is age (sealed to the router's public key) or aes-gcm (sealed by the router's
	// key ring before issue 22; `provider-router credentials rotate` re-seals it).
	Scheme    string     `json:"scheme"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// CredentialSet is the body of PUT /api/v1/admin/providers/{name}/credential.
type CredentialSet struct {
	APIKey string `json:"apiKey" validate:"required,min=8,max=8192"`
}

// RoutingRule maps a routing hint to a provider and, optionally, a model (else the
// provider's model for the hint, else its default model).
type RoutingRule struct {
	Hint     string `json:"hint" validate:"required,oneof=default fast reasoning code long_context creative"`
	Provider string `json:"provider" validate:"required,max=100"`
	Model    string `json:"model,omitempty" validate:"max=200"`
}

// RoutingPolicy is the body and answer of /api/v1/admin/routing: the whole policy.
type RoutingPolicy struct {
	Rules []RoutingRule `json:"rules" validate:"dive"`
}

// ProviderLimit is an upstream limit of a provider's model: requests and tokens per
// minute, 0 meaning no limit.
type ProviderLimit struct {
	Provider  string    `json:"provider"`
	Model     string    `json:"model"`
	RPM       int       `json:"rpm"`
	TPM       int       `json:"tpm"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// LimitSet is the body of PUT /api/v1/admin/limits.
type LimitSet struct {
	Provider string `json:"provider" validate:"required,max=63"`
	Model    string `json:"model" validate:"required,max=200"`
	RPM      int    `json:"rpm" validate:"min=0,max=100000000"`
	TPM      int    `json:"tpm" validate:"min=0,max=2000000000"`
}

// Price is what a million tokens of a model cost, in USD. Source is "default" for the
// platform's built-in price and "org" for the organisation's own.
type Price struct {
	ProviderKind  string    `json:"providerKind"`
	Model         string    `json:"model"`
	InputPerMTok  float64   `json:"inputPerMTok"`
	OutputPerMTok float64   `json:"outputPerMTok"`
	CachedPerMTok float64   `json:"cachedPerMTok"`
	Source        string    `json:"source"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// PriceSet is the body of PUT /api/v1/admin/prices.
type PriceSet struct {
	ProviderKind  string  `json:"providerKind" validate:"required,oneof=openai openrouter openai_compatible anthropic gemini"`
	Model         string  `json:"model" validate:"required,max=200"`
	InputPerMTok  float64 `json:"inputPerMTok" validate:"min=0,max=1000000"`
	OutputPerMTok float64 `json:"outputPerMTok" validate:"min=0,max=1000000"`
	CachedPerMTok float64 `json:"cachedPerMTok" validate:"min=0,max=1000000"`
}

// ProviderTest is the answer of POST /api/v1/admin/providers/{name}/test: the probe run and
// what the provider said.
type ProviderTest struct {
	OK        bool    `json:"ok"`
	Provider  string  `json:"provider"`
	Model     string  `json:"model,omitempty"`
	JobID     string  `json:"jobId"`
	Answer    string  `json:"answer,omitempty"`
	LatencyMS int64   `json:"latencyMs"`
	CostUSD   float64 `json:"costUsd"`
	// Error is the run's structured error when the probe failed (e.g. PROVIDER_REJECTED
	// with context.provider_status 401 for a wrong key).
	Error map[string]any `json:"error,omitempty"`
}
