package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/ids"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// MaxBatch is the most items one batch may hold.
const MaxBatch = 500

// BatchRequest is the body of POST /api/v1/dispatch/batch. Items stay raw so each one is
// decoded, validated and answered on its own.
type BatchRequest struct {
	Items []json.RawMessage `json:"items" validate:"required,min=1,max=500"`
}

// DecodeBatch reads the body of POST /api/v1/dispatch/batch as Decode does, except that what
// is wrong inside an item's JSON — a NUL character, a member name given twice, text that is
// not valid Unicode — is that item's 400, found when the item is decoded, as it would be if
// the item were sent alone: one bad item never fails the others. What is wrong with the
// batch's own JSON refuses the batch.
func DecodeBatch(body io.Reader, v *Validator, dst *BatchRequest) error {
	return decode(body, v, dst, func(b []byte) []FieldError {
		var own []FieldError
		for _, f := range checkBody(b) {
			if !strings.HasPrefix(f.Field, "items[") {
				own = append(own, f)
			}
		}
		return own
	})
}

// BatchItem is the answer for one item: its HTTP status and either the result or the error.
type BatchItem struct {
	Index  int          `json:"index"`
	Status int          `json:"status"`
	Result *Result      `json:"result,omitempty"`
	Error  *apierr.Body `json:"error,omitempty"`
}

// BatchResult is the answer of a batch.
type BatchResult struct {
	BatchID  string      `json:"batchId"`
	Accepted int         `json:"accepted"`
	Failed   int         `json:"failed"`
	Items    []BatchItem `json:"items"`
}

// batchItem is one item on its way through the pipeline: it ends with a result or an error.
type batchItem struct {
	req Request
	// valid is set once the item has decoded and validated: from then on a repeated
	// idempotency key decides its answer, as in a single dispatch.
	valid bool
	job   *job
	res   *Result
	err   error
	// sameKey is the index of the earlier item of the batch that claimed this item's
	// idempotency key, or -1.
	sameKey int
}

// open reports whether the item still goes on through the pipeline.
func (it *batchItem) open() bool { return it.err == nil && it.res == nil && it.sameKey < 0 }

// DispatchBatch dispatches every item through the phases of a single dispatch, each item
// checked, governed and answered on its own — one bad item never fails the others — while
// the rate limit is charged once per user, every accepted item's rows are written in one
// transaction and the enqueues overlap. An item that repeats an idempotency key of an
// earlier run, or of an earlier item of the batch that was accepted, answers 200 with that
// job; an item whose enqueue fails is taken back and answers 503.
func (s *Service) DispatchBatch(ctx context.Context, p auth.Principal, v *Validator, req BatchRequest) (BatchResult, error) {
	started := time.Now().UTC()
	res := BatchResult{BatchID: ids.New(), Items: make([]BatchItem, len(req.Items))}
	org, err := s.activeOrg(ctx, p.OrgID)
	if err != nil {
		return res, err
	}
	items := s.checkItems(ctx, org, v, req.Items)
	s.rateLimitBatch(ctx, org, items)
	jobs := s.governItems(ctx, p, org, items, res.BatchID, started)
	failed, err := s.writeBatch(ctx, res.BatchID, p.OrgID, len(req.Items), jobs)
	if err != nil {
		return res, dbError(err)
	}
	s.enqueueBatch(ctx, p.OrgID, jobs, failed)
	s.answerItems(ctx, p.OrgID, res.BatchID, items, failed)
	for i := range items {
		item := items[i].answer(items)
		item.Index = i
		if item.Error != nil {
			res.Failed++
		} else {
			res.Accepted++
		}
		res.Items[i] = item
	}
	return res, nil
}

// checkItems decodes and validates every item and checks what a single dispatch checks
// before the rate limit: its idempotency key (one query for the batch) and its callback URL.
func (s *Service) checkItems(ctx context.Context, org store.Org, v *Validator, raws []json.RawMessage) []batchItem {
	items := make([]batchItem, len(raws))
	for i, raw := range raws {
		it := &items[i]
		it.sameKey = -1
		if it.err = Decode(bytes.NewReader(raw), v, &it.req); it.err == nil {
			it.err = s.checkRequest(ctx, org.ID, it.req)
		}
		it.valid = it.err == nil
	}
	s.repeatedKeys(ctx, org.ID, items)
	checked := map[string]error{} // callback URL → its verdict: the same URL is resolved once
	for i := range items {
		if it := &items[i]; it.open() && it.req.CallbackURL != "" {
			err, ok := checked[it.req.CallbackURL]
			if !ok {
				err = s.checkCallback(ctx, org, it.req.CallbackURL)
				checked[it.req.CallbackURL] = err
			}
			it.err = err
		}
	}
	return items
}

// governItems governs every open item, settles idempotency keys repeated inside the batch
// and returns the jobs to write, built, in item order.
func (s *Service) governItems(ctx context.Context, p auth.Principal, org store.Org, items []batchItem,
	batchID string, started time.Time) []*job {
	for i := range items {
		if it := &items[i]; it.open() {
			it.job, it.err = s.govern(ctx, p, org, it.req)
			if it.err == nil && it.job.sk.ExecutionType == string(run.Chain) {
				it.job, it.err = nil, apierr.New(http.StatusUnprocessableEntity, apierr.CodeUnsupportedExecutionType,
					fmt.Sprintf("Job type %q is a chain; a batch holds single jobs, and chains are dispatched one at a time.", it.req.JobType),
					"POST each chain to /api/v1/dispatch on its own.").With("job_type", it.req.JobType)
			}
		}
	}
	claimKeys(items)
	s.admitBacklog(ctx, org, items)
	var jobs []*job
	for i := range items {
		if it := &items[i]; it.open() {
			it.job.batchID, it.job.started = batchID, started
			if err := it.job.build(); err != nil {
				it.err = apierr.Internal(err)
				continue
			}
			jobs = append(jobs, it.job)
		}
	}
	return jobs
}

// admitBacklog charges the batch's queued items to the organisation's backlog at once; when
// they do not fit, each of them answers 429 BACKLOG_FULL. Held items need no capacity.
func (s *Service) admitBacklog(ctx context.Context, org store.Org, items []batchItem) {
	queued := func(it *batchItem) bool { return it.open() && it.job.status == run.Queued }
	n := 0
	for i := range items {
		if queued(&items[i]) {
			n++
		}
	}
	if n == 0 {
		return
	}
	if err := s.backlog.admit(ctx, s.runs(), org, n); err != nil {
		for i := range items {
			if it := &items[i]; queued(it) {
				it.err = err
			}
		}
	}
}

// enqueueBatch enqueues the written, queued jobs and takes back, in one statement, the runs
// of those whose enqueue failed, recording their failure.
func (s *Service) enqueueBatch(ctx context.Context, orgID string, jobs []*job, failed map[*job]error) {
	var queued []*job
	for _, j := range jobs {
		if failed[j] == nil && j.status == run.Queued {
			queued = append(queued, j)
		}
	}
	var takeBack []string
	for k, err := range s.enqueueAll(ctx, queued) {
		if err != nil {
			failed[queued[k]] = queueUnavailable(err)
			takeBack = append(takeBack, queued[k].runID)
		}
	}
	if len(takeBack) > 0 {
		s.takeBack(ctx, orgID, takeBack...)
	}
}

// answerItems settles every open item from its job's outcome and publishes the events of
// the accepted ones at once.
func (s *Service) answerItems(ctx context.Context, orgID, batchID string, items []batchItem, failed map[*job]error) {
	var envs []event.Envelope
	for i := range items {
		it := &items[i]
		if !it.open() {
			continue
		}
		switch err := failed[it.job]; {
		case errors.Is(err, runstore.ErrDuplicate):
			var found Result
			found, it.err = s.taken(ctx, orgID, it.req.IdempotencyKey)
			it.res = &found
		case err != nil:
			it.err = dbError(err)
		default:
			out := s.answer(ctx, it.job)
			it.res = &out
			envs = append(envs, *it.job.event)
		}
	}
	if len(envs) > 0 {
		if err := s.Events.Publish(ctx, envs...); err != nil {
			s.Log.Warn("publishing dispatch events", "batch_id", batchID, "events", len(envs), "error", err)
		}
	}
}

// answer is the item's entry in the batch's answer. An item that repeats the key of an
// earlier item answers what that one got.
func (it *batchItem) answer(items []batchItem) BatchItem {
	if it.sameKey >= 0 {
		first := &items[it.sameKey]
		if it.err = first.err; first.res != nil {
			dup := *first.res
			dup.Duplicate = true
			it.res = &dup
		}
	}
	if it.err != nil {
		var ae *apierr.Error
		if !errors.As(it.err, &ae) {
			ae = apierr.Internal(it.err)
		}
		body := ae.Body()
		return BatchItem{Status: ae.Status, Error: &body}
	}
	if it.res.Duplicate {
		return BatchItem{Status: http.StatusOK, Result: it.res}
	}
	return BatchItem{Status: http.StatusAccepted, Result: it.res}
}

// repeatedKeys answers, with one query, every valid item whose idempotency key an earlier
// run of the organisation already used.
func (s *Service) repeatedKeys(ctx context.Context, orgID string, items []batchItem) {
	var keys []string
	for i := range items {
		if it := &items[i]; it.open() && it.req.IdempotencyKey != "" {
			keys = append(keys, it.req.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return
	}
	found, err := s.existingKeys(ctx, orgID, keys)
	for i := range items {
		it := &items[i]
		if !it.open() || it.req.IdempotencyKey == "" {
			continue
		}
		if err != nil {
			it.err = err
		} else if r, ok := found[it.req.IdempotencyKey]; ok {
			it.res = &r
		}
	}
}

// rateLimitBatch charges the items still open to the rate limit once per user of the batch
// (usually one): each user's items, and the organisation, are charged their count at once.
// When a charge is refused, every item of that user answers 429.
func (s *Service) rateLimitBatch(ctx context.Context, org store.Org, items []batchItem) {
	var users []string
	count := map[string]int{}
	for i := range items {
		if it := &items[i]; it.open() {
			if count[it.req.UserID] == 0 {
				users = append(users, it.req.UserID)
			}
			count[it.req.UserID]++
		}
	}
	for _, u := range users {
		err := s.RateLimit(ctx, org, u, count[u])
		if err == nil {
			continue
		}
		for i := range items {
			if it := &items[i]; it.open() && it.req.UserID == u {
				it.err = err
			}
		}
	}
}

// claimKeys gives each idempotency key used by several valid items of the batch to the first
// that governance let through, as dispatching the items one after another would: items
// before it answer their own refusal, items after it answer what it gets.
func claimKeys(items []batchItem) {
	claimed := map[string]int{}
	for i := range items {
		it := &items[i]
		key := it.req.IdempotencyKey
		if key == "" || !it.valid || it.res != nil {
			continue
		}
		if first, ok := claimed[key]; ok {
			it.sameKey, it.err, it.job = first, nil, nil
		} else if it.open() {
			claimed[key] = i
		}
	}
}

// writeBatch writes the batch's row and every job's rows in one transaction: one round trip
// and four statements however many jobs. When a statement fails — a key another request took
// since it was looked up, data Postgres refuses — nothing was written: then the batch's row
// is written alone and each job on its own, so that a failure stays with the job it belongs
// to. It returns the jobs that were not written, with why (runstore.ErrDuplicate for a taken
// key); err is set, and nothing written, when Postgres cannot be reached.
func (s *Service) writeBatch(ctx context.Context, batchID, orgID string, size int, jobs []*job) (map[*job]error, error) {
	failed := map[*job]error{}
	var all rows
	for _, j := range jobs {
		if err := s.snapshots.ensure(ctx, s.DB, j.snap); err != nil {
			failed[j] = err
		} else {
			all.append(&j.rows)
		}
	}
	b := &pgx.Batch{}
	runstore.QueueNewBatch(b, batchID, orgID, size)
	all.queue(b)
	err := s.runs().SendBatch(ctx, b)
	if err == nil {
		return failed, nil
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil, err
	}
	if store.IsMissingSnapshot(err) {
		for _, j := range jobs {
			s.snapshots.forget(j.snap.Digest)
		}
	}
	if err := s.runs().InsertBatch(ctx, batchID, orgID, size); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if failed[j] != nil {
			continue
		}
		if err := s.write(ctx, j); err != nil {
			failed[j] = err
		}
	}
	return failed, nil
}
