package dispatch

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// committer groups the records of concurrent dispatches into one implicit transaction: one
// round trip and one commit (one WAL flush) for every dispatch that arrived while the
// previous group was being written. It only takes what is already waiting, so an idle
// dispatcher pays no delay. If a group fails, each of its dispatches is written on its own,
// so one bad record never fails the others.
type committer struct {
	db   *pgxpool.Pool
	in   chan *pendingRecord
	wg   sync.WaitGroup
	once sync.Once
	quit chan struct{}
}

type pendingRecord struct {
	ctx  context.Context
	b    *pgx.Batch
	done chan error
}

// maxGroup bounds how many dispatches share one transaction; writers is how many groups may
// be in flight at once.
const (
	maxGroup = 64
	writers  = 4
)

func (c *committer) start(db *pgxpool.Pool) {
	c.once.Do(func() {
		c.db = db
		c.in = make(chan *pendingRecord, 4*maxGroup)
		c.quit = make(chan struct{})
		for range writers {
			c.wg.Go(c.loop)
		}
	})
}

// stop ends the writers once the records already handed in are written.
func (c *committer) stop() {
	if c.quit != nil {
		close(c.quit)
		c.wg.Wait()
	}
}

// commit writes one dispatch's batch, grouped with whatever else is waiting.
func (c *committer) commit(ctx context.Context, db *pgxpool.Pool, b *pgx.Batch) error {
	c.start(db)
	p := &pendingRecord{ctx: ctx, b: b, done: make(chan error, 1)}
	select {
	case c.in <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-p.done
}

func (c *committer) loop() {
	for {
		var first *pendingRecord
		select {
		case first = <-c.in:
		case <-c.quit:
			return
		}
		group := []*pendingRecord{first}
	drain:
		for len(group) < maxGroup {
			select {
			case p := <-c.in:
				group = append(group, p)
			default:
				break drain
			}
		}
		c.write(group)
	}
}

func (c *committer) write(group []*pendingRecord) {
	if len(group) == 1 {
		p := group[0]
		p.done <- c.db.SendBatch(p.ctx, p.b).Close()
		return
	}
	all := &pgx.Batch{}
	for _, p := range group {
		all.QueuedQueries = append(all.QueuedQueries, fresh(p.b).QueuedQueries...)
	}
	// The group is written under no single request's deadline: each request still gets
	// its own answer when the group commits.
	if err := c.db.SendBatch(context.Background(), all).Close(); err == nil {
		for _, p := range group {
			p.done <- nil
		}
		return
	}
	// Something in the group failed and the whole transaction rolled back: write each on its
	// own so the failure stays with the dispatch it belongs to.
	for _, p := range group {
		p.done <- c.db.SendBatch(p.ctx, fresh(p.b)).Close()
	}
}

// fresh copies a batch's queries without what a previous send cached in them (the prepared
// statement description, which an aborted pipeline may never have created).
func fresh(b *pgx.Batch) *pgx.Batch {
	out := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, len(b.QueuedQueries))}
	for i, q := range b.QueuedQueries {
		out.QueuedQueries[i] = &pgx.QueuedQuery{SQL: q.SQL, Arguments: q.Arguments, Fn: q.Fn}
	}
	return out
}
