package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// batchAnswer is the answer of a batch with each item's status and result or error.
type batchAnswer struct {
	BatchID  string `json:"batchId"`
	Accepted int    `json:"accepted"`
	Failed   int    `json:"failed"`
	Items    []struct {
		Index  int `json:"index"`
		Status int `json:"status"`
		Result *struct {
			JobID       string `json:"jobId"`
			Status      string `json:"status"`
			Duplicate   bool   `json:"duplicate"`
			HoldReasons []struct {
				Detector string `json:"detector"`
			} `json:"holdReasons"`
		} `json:"result"`
		Error *itemError `json:"error"`
	} `json:"items"`
}

// itemError is an item's error body.
type itemError struct {
	Code    string `json:"code"`
	Context struct {
		Fields []struct {
			Field string `json:"field"`
			Rule  string `json:"rule"`
		} `json:"fields"`
	} `json:"context"`
}

// Fields lists the failing fields as "field:rule".
func (e *itemError) Fields() []string {
	var out []string
	for _, f := range e.Context.Fields {
		out = append(out, f.Field+":"+f.Rule)
	}
	return out
}

// batch posts items (JSON objects) as one batch and decodes the 207.
func (b *bundle) batch(key string, items ...string) batchAnswer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/dispatch/batch",
		strings.NewReader(`{"items":[`+strings.Join(items, ",")+`]}`))
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	require.Equal(b.t, http.StatusMultiStatus, resp.StatusCode)
	var out batchAnswer
	require.NoError(b.t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(b.t, out.Items, len(items))
	return out
}

// codes lists each item's status, with its error code when it has one: "202", "404 SKILL_NOT_FOUND".
func (a batchAnswer) codes() []string {
	out := make([]string, len(a.Items))
	for i, it := range a.Items {
		out[i] = strconv.Itoa(it.Status)
		if it.Error != nil {
			out[i] += " " + it.Error.Code
		}
	}
	return out
}

// TestBatchAnswersEveryItemOnItsOwn sends one item of every kind: each is governed and
// answered as a single dispatch would be, and the accepted ones are written in one
// transaction (one xmin for their runs, spans and events).
func TestBatchAnswersEveryItemOnItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	earlier := b.accepted(b.key, `{"job_type":"demo_llm","payload":{"prompt":"x"},"idempotency_key":"earlier"}`)
	sub := b.rdb.Subscribe(ctx, event.Channel(b.orgID))
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is live before the batch
	require.NoError(t, err)

	a := b.batch(b.key,
		`{"job_type":"demo_llm","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","payload":"not an object"}`,
		`{"job_type":"demo_llm","payload":{},"colour":"red"}`,
		`{"job_type":"demo_critical","payload":{"prompt":"b"}}`,
		`{"job_type":"demo_high_risk","payload":{"prompt":"write to ann@example.com"}}`,
		`{"job_type":"demo_us_only","payload":{"prompt":"c"}}`,
		`{"job_type":"demo_llm","payload":{"prompt":"d"},"idempotency_key":"earlier"}`,
		`{"job_type":"nope","payload":{"prompt":"e"}}`,
		`{"job_type":"demo_llm","payload":{"prompt":"f"},"callback_url":"http://127.0.0.1:9/hook"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"g"},"priority":"high","idempotency_key":"fresh"}`,
	)
	require.Equal(t, []string{"202", "400 VALIDATION_FAILED", "400 VALIDATION_FAILED", "202", "202",
		"403 RESIDENCY_VIOLATION", "200", "404 SKILL_NOT_FOUND", "400 CALLBACK_URL_FORBIDDEN", "202"}, a.codes())
	require.Equal(t, 5, a.Accepted)
	require.Equal(t, 5, a.Failed)
	require.Equal(t, "held_for_review", a.Items[3].Result.Status)
	require.Equal(t, "held_for_review", a.Items[4].Result.Status)
	require.Equal(t, "email", a.Items[4].Result.HoldReasons[0].Detector)
	require.True(t, a.Items[6].Result.Duplicate)
	require.Equal(t, earlier, a.Items[6].Result.JobID)

	accepted := []string{a.Items[0].Result.JobID, a.Items[3].Result.JobID, a.Items[4].Result.JobID, a.Items[9].Result.JobID}
	require.Equal(t, 4, b.count(`SELECT count(*) FROM runs WHERE batch_id = $1 AND id = ANY($2::uuid[])`, a.BatchID, accepted))
	require.Equal(t, 8, b.count(`SELECT count(*) FROM spans WHERE run_id = ANY($1::uuid[])
		AND type IN ('dispatch', 'governance_check')`, accepted), "each run has its dispatch and governance spans")
	require.Equal(t, 1, b.count(`SELECT count(DISTINCT xmin::text) FROM (
			SELECT xmin FROM runs WHERE batch_id = $1
			UNION ALL SELECT s.xmin FROM spans s JOIN runs r ON r.id = s.run_id WHERE r.batch_id = $1
			UNION ALL SELECT e.xmin FROM run_events e JOIN runs r ON r.id = e.run_id WHERE r.batch_id = $1
			UNION ALL SELECT xmin FROM batches WHERE id = $1) x`, a.BatchID),
		"the batch, its runs, spans and events are one transaction")

	for _, i := range []int{0, 9} {
		p := run.PriorityNormal
		if i == 9 {
			p = run.PriorityHigh
		}
		_, err := b.inspector.GetTaskInfo(queue.Tier("default", p), a.Items[i].Result.JobID)
		require.NoError(t, err, "item %d is on its queue", i)
	}
	for _, i := range []int{3, 4} {
		_, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), a.Items[i].Result.JobID)
		require.ErrorIs(t, err, asynq.ErrTaskNotFound, "held item %d is not enqueued", i)
	}

	// Each accepted run's first event is journaled and published.
	seen := map[string]string{}
	deadline := time.After(10 * time.Second)
	for len(seen) < len(accepted) {
		select {
		case msg := <-sub.Channel():
			var env event.Envelope
			require.NoError(t, json.Unmarshal([]byte(msg.Payload), &env))
			seen[env.JobID] = env.Type
		case <-deadline:
			t.Fatalf("published events: %v; want the first event of each of %v", seen, accepted)
		}
	}
	require.Equal(t, map[string]string{accepted[0]: event.JobQueued, accepted[1]: event.JobHeld,
		accepted[2]: event.JobHeld, accepted[3]: event.JobQueued}, seen)
}

// TestBatchRepeatedKeys: within a batch an idempotency key belongs to the first item that
// is accepted, as if the items had been dispatched one after another.
func TestBatchRepeatedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	earlier := b.accepted(b.key, `{"job_type":"demo_llm","payload":{"prompt":"x"},"idempotency_key":"k0"}`)
	items := []string{
		`{"job_type":"nope","payload":{"prompt":"a"},"idempotency_key":"k1"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"b"},"idempotency_key":"k1"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"c"},"idempotency_key":"k1"}`,
		`{"job_type":"demo_llm","payload":"d","idempotency_key":"k2"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"e"},"idempotency_key":"k2"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"f"},"idempotency_key":"k0"}`,
		`{"job_type":"demo_us_only","payload":{"prompt":"g"},"idempotency_key":"k1"}`,
	}
	a := b.batch(b.key, items...)
	require.Equal(t, []string{"404 SKILL_NOT_FOUND", "202", "200", "400 VALIDATION_FAILED", "202", "200", "200"}, a.codes())
	k1, k2 := a.Items[1].Result.JobID, a.Items[4].Result.JobID
	require.Equal(t, k1, a.Items[2].Result.JobID)
	require.Equal(t, k1, a.Items[6].Result.JobID)
	require.Equal(t, earlier, a.Items[5].Result.JobID)
	require.Equal(t, 3, b.count(`SELECT count(*) FROM runs`), "one run per key")

	// Sent again, every valid item repeats a key that now has a run.
	again := b.batch(b.key, items...)
	require.Equal(t, []string{"200", "200", "200", "400 VALIDATION_FAILED", "200", "200", "200"}, again.codes())
	for i, want := range map[int]string{0: k1, 1: k1, 2: k1, 4: k2, 5: earlier, 6: k1} {
		require.Equal(t, want, again.Items[i].Result.JobID, "item %d", i)
	}
	require.Equal(t, 3, b.count(`SELECT count(*) FROM runs`))
}

// TestBatchChargesRateLimitOnce: the batch's items are charged to the user's limit together;
// a batch that does not fit is refused whole instead of being cut at the limit.
func TestBatchChargesRateLimitOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Set before the organisation is first read, so the first dispatch already sees it.
	b.exec(`UPDATE orgs SET user_rpm = 2 WHERE id = $1`, b.orgID)
	a := b.batch(b.key, `{"job_type":"demo_llm","user_id":"u-1","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","user_id":"u-1","payload":{"prompt":"b"}}`,
		`{"job_type":"demo_llm","user_id":"u-1","payload":{"prompt":"c"}}`)
	require.Equal(t, []string{"429 RATE_LIMITED", "429 RATE_LIMITED", "429 RATE_LIMITED"}, a.codes())
	require.Zero(t, b.count(`SELECT count(*) FROM runs`), "three do not fit a limit of two: none is accepted")

	two := b.batch(b.key, `{"job_type":"demo_llm","user_id":"u-2","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","user_id":"u-2","payload":{"prompt":"b"}}`, `{"job_type":"demo_llm","payload":"bad"}`)
	require.Equal(t, []string{"202", "202", "400 VALIDATION_FAILED"}, two.codes(), "an invalid item is not charged")
	one := b.batch(b.key, `{"job_type":"demo_llm","user_id":"u-2","payload":{"prompt":"c"}}`)
	require.Equal(t, []string{"429 RATE_LIMITED"}, one.codes())
}

// TestBatchEnqueueFailureTakesItsItemsBack: when Redis refuses the enqueues, the queued
// items answer 503 and their runs, spans and events are removed; a held item needs no
// queue and is accepted.
func TestBatchEnqueueFailureTakesItsItemsBack(t *testing.T) {
	t.Parallel()
	o := setupOutage(t, false, false, true)
	b := &bundle{t: t, srv: o.srv, pool: o.pool}
	a := b.batch(o.key, `{"job_type":"demo_llm","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_critical","payload":{"prompt":"b"}}`,
		`{"job_type":"demo_llm","payload":"c"}`,
		`{"job_type":"demo_llm","payload":{"prompt":"d"},"idempotency_key":"k"}`)
	require.Equal(t, []string{"503 QUEUE_UNAVAILABLE", "202", "400 VALIDATION_FAILED", "503 QUEUE_UNAVAILABLE"}, a.codes())
	held := a.Items[1].Result.JobID
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs`), "only the held run stays")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND status = 'held_for_review'`, held))
	require.Equal(t, 0, b.count(`SELECT count(*) FROM spans WHERE run_id <> $1`, held))
	require.Equal(t, 0, b.count(`SELECT count(*) FROM run_events WHERE run_id <> $1`, held))
}

// TestBatchBacklogChargedOnce: a batch's queued items are charged to the organisation's
// backlog together; when they do not fit, each answers 429 BACKLOG_FULL and a held item,
// which needs no capacity, is still accepted.
func TestBatchBacklogChargedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`UPDATE orgs SET max_backlog = 3 WHERE id = $1`, b.orgID)
	good := `{"job_type":"demo_llm","payload":{"prompt":"a"}}`
	a := b.batch(b.key, good, good, `{"job_type":"demo_critical","payload":{"prompt":"b"}}`, good, good)
	require.Equal(t, []string{"429 BACKLOG_FULL", "429 BACKLOG_FULL", "202", "429 BACKLOG_FULL", "429 BACKLOG_FULL"}, a.codes())
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs`), "only the held run is written")
	require.Equal(t, []string{"202", "202", "202"}, b.batch(b.key, good, good, good).codes())
}

// TestBatchItemAnswersAsSingleDispatch: every check a single dispatch makes, a batch item
// passes too — the two share one pipeline. Each body is sent alone and as a batch item, and
// the answers must agree on status, code and failing fields.
func TestBatchItemAnswersAsSingleDispatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bodies := []string{
		`{"job_type":"demo_llm","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","payload":"a"}`,
		`{"job_type":"demo_llm","payload":{}}`,
		`{"job_type":"demo_llm","payload":{"messages":"hello"}}`,
		`{"job_type":"demo_llm","user_id":"a\u0000b","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","payload":{"prompt":"a\u0000"}}`,
		`{"job_type":"demo_llm","priority":"urgent","payload":{"prompt":"a"}}`,
		`{"job_type":"nope","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_us_only","payload":{"prompt":"a"}}`,
		`{"job_type":"demo_llm","callback_url":"http://169.254.169.254/x","payload":{"prompt":"a"}}`,
	}
	answer := func(status int, code string, ctx map[string]any) string {
		out := strconv.Itoa(status) + " " + code
		if fields, ok := ctx["fields"].([]any); ok {
			for _, f := range fields {
				m := f.(map[string]any)
				out += " " + m["field"].(string) + ":" + m["rule"].(string)
			}
		}
		return out
	}
	var single []string
	for _, body := range bodies {
		status, res := b.dispatch(body)
		code, _ := res["code"].(string)
		ctx, _ := res["context"].(map[string]any)
		single = append(single, answer(status, code, ctx))
	}
	status, res := b.do(b.key, http.MethodPost, "/api/v1/dispatch/batch", `{"items":[`+strings.Join(bodies, ",")+`]}`)
	require.Equal(t, http.StatusMultiStatus, status, "%v", res)
	var batched []string
	for _, it := range res["items"].([]any) {
		item := it.(map[string]any)
		code, ctx := "", map[string]any{}
		if e, ok := item["error"].(map[string]any); ok {
			code = e["code"].(string)
			ctx, _ = e["context"].(map[string]any)
		}
		batched = append(batched, answer(int(item["status"].(float64)), code, ctx))
	}
	require.Equal(t, single, batched)
}
