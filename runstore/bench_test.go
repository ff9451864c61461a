package runstore_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/span"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// BenchmarkDispatchWrite is one dispatch's rows as the dispatcher writes them: the run, its
// dispatch span and its first event in one round trip (one implicit transaction).
func BenchmarkDispatchWrite(b *testing.B) {
	_, pool := testkit.DB(b)
	ctx := context.Background()
	orgID := testkit.NewOrg(b, pool)
	var digest [32]byte
	if _, err := pool.Exec(ctx, `INSERT INTO skill_snapshots (digest, org_id, snapshot) VALUES ($1, $2, '{}')`,
		digest[:], orgID); err != nil {
		b.Fatal(err)
	}
	s := runstore.New(pool)
	for b.Loop() {
		id, trace := uuid.NewString(), uuid.NewString()
		var rb runstore.RunBatch
		rb.Add(runstore.NewRun{ID: id, OrgID: orgID, TraceID: trace, JobType: "x", SkillVersion: 1,
			SkillSnapshotDigest: digest, ExecutionType: "llm_only", Queue: "default", Priority: "normal",
			Status: "queued", Payload: []byte(`{"prompt":"hi"}`)})
		var sb runstore.SpanBatch
		root := span.Start(id, orgID, trace, "", span.Dispatch, "dispatch x")
		root.ID = id
		if err := sb.Add(root.End(span.OK)); err != nil {
			b.Fatal(err)
		}
		var firsts runstore.Firsts
		if _, err := firsts.Add(id, orgID, event.JobQueued, map[string]any{"queue": "default"}); err != nil {
			b.Fatal(err)
		}
		batch := &pgx.Batch{}
		rb.Queue(batch)
		sb.Queue(batch)
		firsts.Queue(batch)
		if err := s.SendBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTransition is an attempt's end: the run moves and its last events are numbered
// in the same statement.
func BenchmarkTransition(b *testing.B) {
	_, pool := testkit.DB(b)
	ctx := context.Background()
	done, err := event.NewDraft(event.JobCompleted, map[string]any{"status": "completed"})
	if err != nil {
		b.Fatal(err)
	}
	s := runstore.New(pool)
	for b.Loop() {
		b.StopTimer()
		id, _ := testkit.NewRun(b, pool, "running")
		b.StartTimer()
		batch := &pgx.Batch{}
		out, err := runstore.QueueTransition(batch, id, nil, "completed", runstore.Change{Output: []byte(`{"text":"hi"}`)},
			[]event.Draft{done})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.SendBatch(ctx, batch); err != nil || !out.Moved {
			b.Fatal(err, out.Moved)
		}
	}
}
