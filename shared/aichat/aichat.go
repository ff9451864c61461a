// Package aichat is the contract between the executor and the provider router:
// POST /internal/ai/chat with an OpenAI Chat Completions body and the job's context in
// headers; the answer is an OpenAI ChatCompletion plus provider, model and cost.
//
// Only the executor and the router import this package; the dispatcher never does.
package aichat

// Path is the router's chat endpoint.
const Path = "/internal/ai/chat"

// PricePath is the router's price endpoint: POST with the chat endpoint's routing headers
// (X-Org-ID, X-Routing-Hint, X-Model-Override, X-Provider) and no body answers the Quote of
// the model a call with those headers would be routed to. The executor estimates a run's
// cost with it before the run starts; the router alone knows routes and prices.
const PricePath = "/internal/ai/price"

// Quote is the price endpoint's answer: where such a call goes and what its tokens cost
// (USD per million). Known is false when the model has no price (a call under a cost
// ceiling would then be refused PRICE_UNKNOWN).
type Quote struct {
	Provider      string  `json:"provider"`
	Model         string  `json:"model"`
	Known         bool    `json:"known"`
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// Headers carrying the job context.
const (
	HeaderOrgID         = "X-Org-ID"
	HeaderJobID         = "X-Job-ID"
	HeaderTraceID       = "X-Trace-ID"
	HeaderRoutingHint   = "X-Routing-Hint"
	HeaderCallerService = "X-Caller-Service"
	HeaderServiceKey    = "X-Service-Key"
	// Optional context the router uses for scheduling, quotas and the usage ledger.
	HeaderUserID        = "X-User-ID"
	HeaderJobType       = "X-Job-Type"
	HeaderChainID       = "X-Chain-ID"
	HeaderPriority      = "X-Priority"
	HeaderModelOverride = "X-Model-Override"
	HeaderResidency     = "X-Data-Residency"
	HeaderCostCeiling   = "X-Cost-Ceiling-USD"
	HeaderDeadline      = "X-Deadline"
	HeaderQueueWaitMS   = "X-Queue-Wait-MS"
	// HeaderStepKey names the call's position in its run, the same for every attempt of
	// the run (the journal's step key: "llm/1", "iter/2/llm"). With X-Job-ID it identifies one paid provider
	// call: a call repeated under the same pair (a retry, a resumed attempt, a racing caller)
	// is answered with the first call's answer instead of being paid again, and the usage
	// ledger has the one row of the one paid call.
	HeaderStepKey = "X-Step-Key"
	// HeaderSpanID is the id of the caller's llm_call span (a UUID) that the call is made
	// under. The router uses it for nothing but the call's usage-ledger row (span_id), where
	// the audit export reads it; a value that is not a UUID is refused (400).
	HeaderSpanID = "X-Span-ID"
	// HeaderCapacityWait is how long, in milliseconds, the caller will hold its worker
	// waiting for rate-limit capacity. A call that would wait longer is answered at once
	// with 429 RATE_LIMIT_WAIT and a time to come back (context retry_after_ms, and
	// Retry-After), so that waiting for a provider holds no worker. Absent: the call
	// waits up to its deadline.
	HeaderCapacityWait = "X-Capacity-Wait-MS"
	// HeaderChainPending is, on a chain step's call, how many of the chain's steps are not
	// yet dispatched: what remains of the chain after this step's stage. The router's
	// "remaining" queue order counts them with the chain's calls outstanding.
	HeaderChainPending = "X-Chain-Pending"
	// HeaderProvider pins the call to one of the organisation's enabled providers by name,
	// past the routing policy: the provider's model for the hint (or its default) serves
	// it. Sent only for a "Test connection" probe (job type switchyard.provider-test).
	HeaderProvider = "X-Provider"
)

// Billing is what the router adds to the ChatCompletion in its answer. The model that
// served the call is the ChatCompletion's own "model" field.
type Billing struct {
	Provider string  `json:"provider"`
	CostUSD  float64 `json:"cost_usd"`
}
