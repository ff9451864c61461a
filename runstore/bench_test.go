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

// BenchmarkAnnounced is what a resumed autonomous attempt reads once, at the first replayed
// answer it could announce: the announcements among a long run's events (1,000 events, of
// which 100 announcements and 900 job:span events of about 800 bytes each).
func BenchmarkAnnounced(b *testing.B) {
	_, pool := testkit.DB(b)
	ctx := context.Background()
	runID, orgID := testkit.NewRun(b, pool, "running")
	var drafts []event.Draft
	pad := make([]byte, 700)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := range 1000 {
		typ, data := event.JobSpan, map[string]any{"id": uuid.NewString(), "attributes": map[string]any{"pad": string(pad)}}
		if i%10 == 0 {
			typ, data = event.JobThinking, map[string]any{"phase": "reflection", "reasoning": "ok",
				"announces": "reflect/" + uuid.NewString() + "/try/1"}
		}
		d, err := event.NewDraft(typ, data)
		if err != nil {
			b.Fatal(err)
		}
		drafts = append(drafts, d)
	}
	batch := &pgx.Batch{}
	runstore.QueueEvents(batch, runID, orgID, drafts)
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE run_events`); err != nil {
		b.Fatal(err)
	}
	s := runstore.New(pool)
	types := []string{event.JobPlanCreated, event.JobReflection, event.JobPlanAdjusted, event.JobThinking}
	for b.Loop() {
		keys, _, err := s.Announced(ctx, runID, types)
		if err != nil || len(keys) != 100 {
			b.Fatal(len(keys), err)
		}
	}
}
