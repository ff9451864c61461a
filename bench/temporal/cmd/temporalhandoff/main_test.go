package main

import (
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
)

// The workflow runs the three activities one after another, and the recorder hands back
// each one's start and end in that order.
func TestChain3RunsTheStepsInOrder(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	rec := &recorder{runs: map[string]*[steps][2]time.Time{}}
	env.RegisterActivity(rec.Step)
	env.ExecuteWorkflow(Chain3)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if len(rec.runs) != 1 {
		t.Fatalf("recorded %d workflows, want 1", len(rec.runs))
	}
	for id := range rec.runs {
		ts, ok := rec.take(id)
		if !ok {
			t.Fatalf("workflow %s: a step recorded no start or end: %v", id, ts)
		}
		for i := 1; i < steps; i++ {
			if ts[i][0].Before(ts[i-1][1]) {
				t.Errorf("step %d started at %v, before step %d ended at %v", i, ts[i][0], i-1, ts[i-1][1])
			}
		}
	}
}
