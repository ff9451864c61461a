package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/event"
)

// RecordEvent appends an event to the run's event journal with the run's next sequence
// number. Inside a transaction, publish the returned envelope after the commit.
func (s *Store) RecordEvent(ctx context.Context, runID, orgID, typ string, data any) (event.Envelope, error) {
	d, err := event.NewDraft(typ, data)
	if err != nil {
		return event.Envelope{}, err
	}
	env := event.Envelope{Type: typ, JobID: runID, OrgID: orgID, Data: d.Data}
	types, raw := eventColumns([]event.Draft{d})
	if err := s.db.QueryRow(ctx, recordEventsSQL, runID, types, raw).Scan(&env.Seq, &env.TS); err != nil {
		return event.Envelope{}, fmt.Errorf("journaling %s event of run %s: %w", typ, runID, err)
	}
	return env, nil
}

// insertEventsFrom is the insert that journals drafted events: src names a row source with
// the columns run_id, org_id and base (the sequence number before the first event's), types
// and data the parameters holding eventColumns. It is written to be used as a
// data-modifying CTE of the statement that takes the numbers (a transition's); the static
// statements in sql/ spell the same insert out.
func insertEventsFrom(src, types, data string) string {
	return `INSERT INTO run_events (run_id, seq, org_id, type, data)
		SELECT s.run_id, s.base + x.n, s.org_id, x.type, x.data
		FROM ` + src + ` s, unnest(` + types + `::text[], ` + data + `::jsonb[]) WITH ORDINALITY AS x(type, data, n)`
}

// eventColumns are the drafts' types and data as the parameters the event inserts take;
// never nil, so that no drafts is an empty array rather than NULL.
func eventColumns(drafts []event.Draft) (types, data []string) {
	types, data = make([]string, len(drafts)), make([]string, len(drafts))
	for i, d := range drafts {
		types[i], data[i] = d.Type, string(d.Data)
	}
	return types, data
}

// numbered returns the envelopes of drafts journaled with sequence numbers from first on.
func numbered(runID, orgID string, drafts []event.Draft, first int64, ts time.Time) []event.Envelope {
	if len(drafts) == 0 {
		return nil
	}
	envs := make([]event.Envelope, len(drafts))
	for i, d := range drafts {
		envs[i] = event.Envelope{Type: d.Type, JobID: runID, OrgID: orgID, Seq: first + int64(i), TS: ts, Data: d.Data}
	}
	return envs
}

// QueueEvents adds to a batch one statement that journals a run's events in the order
// given, with consecutive sequence numbers: one update of the run row for all of them
// instead of one each. The returned envelopes are complete once the batch has run without
// error.
func QueueEvents(b *pgx.Batch, runID, orgID string, drafts []event.Draft) []event.Envelope {
	if len(drafts) == 0 {
		return nil
	}
	envs := numbered(runID, orgID, drafts, 0, time.Time{})
	types, data := eventColumns(drafts)
	b.Queue(recordEventsSQL, runID, types, data).QueryRow(func(row pgx.Row) error {
		var first int64
		var ts time.Time
		if err := row.Scan(&first, &ts); err != nil {
			return fmt.Errorf("journaling %d events of run %s: %w", len(drafts), runID, err)
		}
		for i := range envs {
			envs[i].Seq, envs[i].TS = first+int64(i), ts
		}
		return nil
	})
	return envs
}

// Firsts collects the first events (seq 1) of new runs inserted in the same transaction
// with event_seq 1 (RunBatch does), for one statement: no read-modify-write of the run
// rows, and one statement for every run a dispatcher accepted at the same moment.
type Firsts struct {
	envs []*event.Envelope
}

// Add adds a run's first event. The envelope is complete (its TS set) once the batch that
// Queue wrote into has run without error.
func (f *Firsts) Add(runID, orgID, typ string, data any) (*event.Envelope, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encoding %s event: %w", typ, err)
	}
	env := &event.Envelope{Type: typ, JobID: runID, OrgID: orgID, Seq: 1, Data: raw}
	f.envs = append(f.envs, env)
	return env, nil
}

// Append adds every event of other; their envelopes are completed by this batch's Queue.
func (f *Firsts) Append(other *Firsts) { f.envs = append(f.envs, other.envs...) }

// Len is the number of events in the batch.
func (f *Firsts) Len() int { return len(f.envs) }

// Queue adds the journaling of every event of the batch to a pgx batch.
func (f *Firsts) Queue(b *pgx.Batch) {
	if len(f.envs) == 0 {
		return
	}
	runs, orgs, types, data := make([]string, len(f.envs)), make([]string, len(f.envs)),
		make([]string, len(f.envs)), make([]string, len(f.envs))
	byRun := make(map[string]*event.Envelope, len(f.envs))
	for i, env := range f.envs {
		runs[i], orgs[i], types[i], data[i] = env.JobID, env.OrgID, env.Type, string(env.Data)
		byRun[env.JobID] = env
	}
	b.Queue(recordFirstsSQL, runs, orgs, types, data).Query(func(rows pgx.Rows) error {
		var run string
		var ts time.Time
		_, err := pgx.ForEachRow(rows, []any{&run, &ts}, func() error {
			if env := byRun[run]; env != nil {
				env.TS = ts
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("journaling the first events of %d runs: %w", len(f.envs), err)
		}
		return nil
	})
}

// Replay returns the run's journaled events with seq greater than after, in order. Only
// events of orgID are returned.
func (s *Store) Replay(ctx context.Context, orgID, runID string, after int64) ([]event.Envelope, error) {
	rows, err := s.db.Query(ctx, replayEventsSQL, runID, orgID, after)
	if err != nil {
		return nil, fmt.Errorf("replaying events of run %s: %w", runID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (event.Envelope, error) {
		var e event.Envelope
		err := r.Scan(&e.Type, &e.JobID, &e.OrgID, &e.Seq, &e.TS, &e.Data)
		return e, err
	})
}

// LastEventData returns the data of a run's latest event of a type (nil when it has none).
func (s *Store) LastEventData(ctx context.Context, runID, typ string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := s.db.QueryRow(ctx, lastEventDataSQL, runID, typ).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return raw, err
}

// Announced returns which announcements the run's events hold already: for each event of
// one of types, its type and the journal step key of the answer it announces (data's
// "announces"), as "<type> <step>". unkeyed is true when one of them carries no key (it was
// written before announcements carried one), so that which answers it announced is unknown.
func (s *Store) Announced(ctx context.Context, runID string, types []string) (keys map[string]bool, unkeyed bool, err error) {
	rows, err := s.db.Query(ctx, announcedSQL, runID, types)
	if err != nil {
		return nil, false, fmt.Errorf("reading the announcements of run %s: %w", runID, err)
	}
	keys = map[string]bool{}
	var typ string
	var step *string
	_, err = pgx.ForEachRow(rows, []any{&typ, &step}, func() error {
		if step == nil {
			unkeyed = true
		} else {
			keys[AnnouncementKey(typ, *step)] = true
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the announcements of run %s: %w", runID, err)
	}
	return keys, unkeyed, nil
}

// AnnouncementKey is how Announced names the announcement of type typ of the answer
// journaled under step.
func AnnouncementKey(typ, step string) string { return typ + " " + step }
