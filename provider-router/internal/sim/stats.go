package sim

import "sync/atomic"

// Counters is what the simulator served and refused, for one model or in total. For a
// quiescent server (nothing in flight, no reset during the phase):
// requests = served + refused_429 + errors_5xx + cancelled.
type Counters struct {
	// Requests is every chat completion request for the model that was well formed.
	Requests int64 `json:"requests"`
	// Served is requests answered 200 with the whole answer written.
	Served int64 `json:"served"`
	// Refused429 is requests refused by the RPM or TPM limit.
	Refused429 int64 `json:"refused_429"`
	// Errors5xx is requests answered 500 or 503 by error injection.
	Errors5xx int64 `json:"errors_5xx"`
	// Cancelled is admitted requests whose client went away before the answer was
	// complete.
	Cancelled int64 `json:"cancelled"`
	// InFlight is admitted requests currently waiting out their latency or streaming.
	InFlight int64 `json:"in_flight"`
	// MaxInFlight is the high-water mark of InFlight since start or the last reset.
	MaxInFlight int64 `json:"max_in_flight"`
	// PromptTokens and CompletionTokens sum the usage of served requests.
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Streamed is the served requests that were streamed.
	Streamed int64 `json:"streamed"`
}

// Stats is the body of GET /sim/stats.
type Stats struct {
	// Models holds the counters of each configured model, by name.
	Models map[string]Counters `json:"models"`
	// Total sums every model; its max_in_flight is the high-water mark across models.
	Total Counters `json:"total"`
	// BadRequests counts answers 400 and 404 (bad JSON, unknown model, invalid
	// tool_choice), which belong to no model.
	BadRequests int64 `json:"bad_requests"`
	// TimeScale is the configured --time-scale, so a benchmark report can show it.
	TimeScale float64 `json:"time_scale"`
	// Repeats sums the requests served more than once; present only with
	// Config.TrackRepeats (GET /sim/repeats lists them).
	Repeats *RepeatTotals `json:"repeats,omitempty"`
}

// counters is the lock-free form of Counters: every request touches a few atomics, so
// thousands of concurrent requests never contend on a lock for bookkeeping.
type counters struct {
	requests, served, refused, errors, cancelled atomic.Int64
	inFlight, maxInFlight                        atomic.Int64
	promptTokens, completionTokens, streamed     atomic.Int64
}

func (c *counters) enter() {
	n := c.inFlight.Add(1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *counters) snapshot() Counters {
	return Counters{
		Requests:         c.requests.Load(),
		Served:           c.served.Load(),
		Refused429:       c.refused.Load(),
		Errors5xx:        c.errors.Load(),
		Cancelled:        c.cancelled.Load(),
		InFlight:         c.inFlight.Load(),
		MaxInFlight:      c.maxInFlight.Load(),
		PromptTokens:     c.promptTokens.Load(),
		CompletionTokens: c.completionTokens.Load(),
		Streamed:         c.streamed.Load(),
	}
}

// reset zeroes the counters but in_flight, which requests still running will decrement;
// the high-water mark restarts from what is in flight now.
func (c *counters) reset() {
	for _, a := range []*atomic.Int64{&c.requests, &c.served, &c.refused, &c.errors, &c.cancelled,
		&c.promptTokens, &c.completionTokens, &c.streamed} {
		a.Store(0)
	}
	c.maxInFlight.Store(c.inFlight.Load())
}

// tally updates a model's counters and the totals together.
type tally struct{ m, t *counters }

func (x tally) each(f func(c *counters)) { f(x.m); f(x.t) }

func (x tally) request()   { x.each(func(c *counters) { c.requests.Add(1) }) }
func (x tally) refused()   { x.each(func(c *counters) { c.refused.Add(1) }) }
func (x tally) errored()   { x.each(func(c *counters) { c.errors.Add(1) }) }
func (x tally) cancelled() { x.each(func(c *counters) { c.cancelled.Add(1) }) }
func (x tally) enter()     { x.each(func(c *counters) { c.enter() }) }
func (x tally) leave()     { x.each(func(c *counters) { c.inFlight.Add(-1) }) }

func (x tally) served(a answer, streamed bool) {
	x.each(func(c *counters) {
		c.served.Add(1)
		c.promptTokens.Add(int64(a.promptTokens))
		c.completionTokens.Add(int64(a.completionTokens()))
		if streamed {
			c.streamed.Add(1)
		}
	})
}
