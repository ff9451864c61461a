package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestParseLevels(t *testing.T) {
	got, err := parseLevels("1x200, 200x1000")
	if err != nil || !slices.Equal(got, []level{{1, 200}, {200, 1000}}) {
		t.Fatalf("parseLevels = %v, %v", got, err)
	}
	for _, bad := range []string{"", "200", "0x10", "1x0", "ax1", "1x200,"} {
		if _, err := parseLevels(bad); err == nil {
			t.Errorf("parseLevels(%q) accepted it", bad)
		}
	}
}

// A chain's hand-offs are read from the runs chain_steps names — a step's latest attempt,
// not an earlier one that failed.
func TestStepHandoffsReadTheStepsLatestRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := testkit.DB(t)
	org := testkit.NewOrg(t, pool)
	var chain string
	if err := pool.QueryRow(ctx, `INSERT INTO chains (org_id, trace_id, job_type, status, definition)
		VALUES ($1, gen_random_uuid(), $2, 'completed', '{}') RETURNING id::text`, org, chainSkill).Scan(&chain); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	run := func(step string, start, end time.Time) string {
		id := uuid.NewString()
		if _, err := pool.Exec(ctx, `INSERT INTO runs (id, org_id, trace_id, job_type, skill_version, skill_snapshot,
			execution_type, queue, status, payload, chain_id, chain_step, started_at, finished_at)
			VALUES ($1, $2, gen_random_uuid(), 'demo_llm', 1, '{}', 'llm_only', 'default', 'completed', '{}', $3, $4, $5, $6)`,
			id, org, chain, step, start, end); err != nil {
			t.Fatal(err)
		}
		return id
	}
	latest := map[string]string{"s1": run("s1", ms(0), ms(10)), "s2": run("s2", ms(40), ms(50)), "s3": run("s3", ms(53), ms(60))}
	run("s2", ms(20), ms(25)) // another attempt of s2, which chain_steps does not name
	for step, id := range latest {
		if _, err := pool.Exec(ctx, `INSERT INTO chain_steps (chain_id, step_id, status, run_id) VALUES ($1, $2, 'completed', $3)`,
			chain, step, id); err != nil {
			t.Fatal(err)
		}
	}
	got, err := stepHandoffs(ctx, pool, []string{chain}, switchyardSystems["switchyard"].pairs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{30 * time.Millisecond, 3 * time.Millisecond}; !slices.Equal(got.handoffs, want) {
		t.Fatalf("hand-offs %v, want %v", got.handoffs, want)
	}
	if c, p := got.parts["coordinator"], got.parts["pickup"]; len(c) != 2 || len(p) != 2 || c[0]+p[0] != 30*time.Millisecond {
		t.Fatalf("parts %v do not add up to the hand-offs", got.parts)
	}
}
