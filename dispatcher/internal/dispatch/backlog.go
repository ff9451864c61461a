package dispatch

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// backlogRefresh is how often a process reads an organisation's backlog from Postgres while
// it dispatches for it; in between it counts what it accepted itself.
const backlogRefresh = 500 * time.Millisecond

// backlogs caps each organisation's backlog — its runs queued or running — at its
// max_backlog: a dispatch beyond it answers 429 BACKLOG_FULL with Retry-After, so that a
// flood of work is pushed back to its sender instead of piling up (seed 002's
// backpressure). Work already accepted is never refused; parked runs count, held ones do
// not (they wait for a person, not for capacity).
//
// The count is read at most every backlogRefresh per organisation and process, plus what
// the process accepted since: dispatchers never pay a query per dispatch, and several
// replicas together may overshoot the cap by what they accept within one refresh.
type backlogs struct {
	mu   sync.Mutex
	orgs map[string]*orgBacklog
}

type orgBacklog struct {
	mu       sync.Mutex
	count    int64 // live runs at the last read, plus what was accepted since
	accepted int64 // accepted since the last read
	readAt   time.Time
	drain    float64 // runs leaving the backlog per second, smoothed
}

func (b *backlogs) of(orgID string) *orgBacklog {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.orgs == nil {
		b.orgs = map[string]*orgBacklog{}
	}
	o, ok := b.orgs[orgID]
	if !ok {
		o = &orgBacklog{}
		b.orgs[orgID] = o
	}
	return o
}

// admit charges n new runs to the organisation's backlog, or refuses them all.
func (b *backlogs) admit(ctx context.Context, db liveCounter, org store.Org, n int) error {
	if org.MaxBacklog <= 0 {
		return nil
	}
	o := b.of(org.ID)
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := time.Now(); now.Sub(o.readAt) >= backlogRefresh {
		live, err := db.LiveRuns(ctx, org.ID, org.MaxBacklog+1)
		if err != nil {
			return dbError(fmt.Errorf("reading the organisation's backlog: %w", err))
		}
		if !o.readAt.IsZero() {
			// What left since the last read: what was there, plus what came, less what is.
			left := float64(o.count-live) / now.Sub(o.readAt).Seconds()
			o.drain = 0.7*o.drain + 0.3*math.Max(left, 0)
		}
		o.count, o.accepted, o.readAt = live, 0, now
	}
	if o.count+int64(n) <= int64(org.MaxBacklog) {
		o.count += int64(n)
		o.accepted += int64(n)
		return nil
	}
	over := o.count + int64(n) - int64(org.MaxBacklog)
	retry := 60
	if o.drain > 0 {
		retry = min(max(int(math.Ceil(float64(over)/o.drain)), 1), 60)
	}
	return apierr.New(http.StatusTooManyRequests, apierr.CodeBacklogFull,
		fmt.Sprintf("The organisation has %d runs queued or running, its limit (maxBacklog) is %d: nothing was accepted.",
			o.count, org.MaxBacklog),
		"Retry after the number of seconds in the Retry-After header, when runs have finished.",
		"An admin can raise maxBacklog (PATCH /api/v1/admin/org).").
		With("max_backlog", org.MaxBacklog, "backlog", o.count, "requested", n, "retry_after_seconds", retry).
		SetHeader("Retry-After", strconv.Itoa(retry))
}
