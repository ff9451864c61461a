package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
)

// The in-process dispatcher has no executor: a chain's root step stays queued and the chain
// runs until it is cancelled, which is what these tests of the API's shape need. The
// coordinator's own tests run chains to their end.

// chainSkill binds test_chain: plan, then a and b in parallel, then synth.
func chainSkill(t *testing.T, c *client.Client) string {
	t.Helper()
	def := json.RawMessage(`{"steps": [
		{"step_id": "plan", "job_type": "demo_llm", "payload": {"prompt": "plan"}},
		{"step_id": "a", "job_type": "demo_llm", "depends_on": ["plan"], "payload": {"prompt": "a"}},
		{"step_id": "b", "job_type": "demo_llm", "depends_on": ["plan"], "payload": {"prompt": "b"}},
		{"step_id": "synth", "job_type": "demo_llm", "depends_on": ["a", "b"], "payload": {"prompt": "synth"}}]}`)
	_, _, err := c.Skills.Put(context.Background(), client.SkillSpec{JobType: "test_chain", Enabled: true,
		ExecutionType: "chain", Description: "plan, two analyses, synthesis", Chain: def})
	require.NoError(t, err)
	return "test_chain"
}

// startChain dispatches a chain and returns the answer, which names the chain.
func startChain(t *testing.T, c *client.Client, jobType string) client.DispatchResult {
	t.Helper()
	res, err := c.Dispatch(context.Background(), client.DispatchRequest{JobType: jobType,
		Payload: map[string]any{"topic": "tides"}})
	require.NoError(t, err)
	require.NotEmpty(t, res.JobID)
	require.NotEmpty(t, res.ChainID, "a chain skill's dispatch names its chain")
	return res
}

// rootDispatched waits until the coordinator has started the chain — its start is a
// transition on the coordinator queue, after the dispatch's answer — and returns the chain
// with its root step dispatched.
func rootDispatched(t *testing.T, c *client.Client, chainID string) *client.Chain {
	t.Helper()
	var ch *client.Chain
	require.Eventually(t, func() bool {
		var err error
		ch, err = c.Chain(context.Background(), chainID)
		require.NoError(t, err)
		return step(t, ch, "plan").JobID != ""
	}, 10*time.Second, 10*time.Millisecond, "the chain's root was never dispatched")
	return ch
}

// step returns a chain's step by id.
func step(t *testing.T, ch *client.Chain, id string) client.ChainStep {
	t.Helper()
	for _, s := range ch.Steps {
		if s.StepID == id {
			return s
		}
	}
	require.Failf(t, "no such step", "%s in %+v", id, ch.Steps)
	return client.ChainStep{}
}

func TestChainDispatchGetAndList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	jobType := chainSkill(t, b.admin)

	plain, err := b.admin.Dispatch(ctx, hello)
	require.NoError(t, err)
	require.Empty(t, plain.ChainID, "a job that is not a chain names none")

	res := startChain(t, b.admin, jobType)
	ch := rootDispatched(t, b.admin, res.ChainID)
	require.Equal(t, res.ChainID, ch.ChainID)
	require.Equal(t, res.JobID, ch.JobID, "the dispatched job is the chain's parent run")
	require.Equal(t, jobType, ch.JobType)
	require.Equal(t, client.ChainRunning, ch.Status)
	require.False(t, client.ChainEnded(ch.Status))
	require.Equal(t, "abort", ch.OnFailure)
	require.False(t, ch.CreatedAt.IsZero())
	require.Nil(t, ch.FinishedAt)
	require.Len(t, ch.Steps, 4)
	plan := step(t, ch, "plan")
	require.Equal(t, string(client.StatusQueued), plan.Status, "the root is dispatched at start")
	require.NotEmpty(t, plan.JobID)
	require.Equal(t, 1, plan.Attempt)
	require.Equal(t, "demo_llm", plan.JobType)
	synth := step(t, ch, "synth")
	require.Equal(t, client.StepPending, synth.Status)
	require.Empty(t, synth.JobID)
	require.Zero(t, synth.Attempt)
	require.ElementsMatch(t, []string{"a", "b"}, synth.DependsOn)

	// The step's run is a run like any other, of the organisation.
	r, err := b.admin.Get(ctx, plan.JobID)
	require.NoError(t, err)
	require.Equal(t, "demo_llm", r.JobType)

	_, err = b.admin.Chain(ctx, uuid.NewString())
	require.ErrorIs(t, err, client.ErrChainNotFound)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)

	// Listing: newest first, paged like GET /api/v1/dispatch.
	ids := []string{res.ChainID, startChain(t, b.admin, jobType).ChainID, startChain(t, b.admin, jobType).ChainID}
	page, err := b.admin.ListChains(ctx, client.ChainListOptions{Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.NotEmpty(t, page.NextCursor)
	require.Equal(t, ids[2], page.Items[0].ChainID, "newest first")

	var seen []string
	for c, err := range b.admin.ListAllChains(ctx, client.ChainListOptions{Limit: 2, Status: client.ChainRunning, JobType: jobType}) {
		require.NoError(t, err)
		require.Equal(t, 4, c.Steps)
		require.Equal(t, jobType, c.JobType)
		seen = append(seen, c.ChainID)
	}
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, seen, "every chain once, newest first")

	for _, opts := range []client.ChainListOptions{{Status: client.ChainCompleted}, {JobType: "demo_llm"}} {
		none, err := b.admin.ListChains(ctx, opts)
		require.NoError(t, err)
		require.Empty(t, none.Items, "%+v", opts)
	}
	_, err = b.admin.ListChains(ctx, client.ChainListOptions{Status: "sideways"})
	require.ErrorIs(t, err, client.ErrValidationFailed)

	// Readers may read chains; only dispatch may act on them.
	viewer := b.client(b.create(auth.RoleViewer))
	_, err = viewer.Chain(ctx, res.ChainID)
	require.NoError(t, err)
	_, err = viewer.ListChains(ctx, client.ChainListOptions{})
	require.NoError(t, err)
	_, err = b.client(b.create(auth.RoleApprove)).Chain(ctx, res.ChainID)
	require.NoError(t, err)
	_, err = viewer.CancelChain(ctx, res.ChainID)
	require.ErrorIs(t, err, client.ErrForbidden)
	_, err = viewer.RerunChain(ctx, res.ChainID)
	require.ErrorIs(t, err, client.ErrForbidden)
}

func TestCancelAndRerunChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	jobType := chainSkill(t, b.admin)
	dispatcher := b.client(b.create(auth.RoleDispatch))
	res := startChain(t, dispatcher, jobType)
	rootDispatched(t, dispatcher, res.ChainID)

	// A running chain cannot be rerun.
	_, err := dispatcher.RerunChain(ctx, res.ChainID)
	require.ErrorIs(t, err, client.ErrChainNotFinished)
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)

	// Cancel is retried through a transient outage, as a job's cancel is.
	b.fail.Store(2)
	path := "/api/v1/chains/" + res.ChainID + "/cancel"
	before := b.requests(path)
	ctl, err := dispatcher.CancelChain(ctx, res.ChainID)
	require.NoError(t, err)
	require.Equal(t, before+3, b.requests(path))
	require.Equal(t, client.ChainControl{ChainID: res.ChainID, JobID: res.JobID, Status: client.ChainCancelled}, ctl)

	ch, err := dispatcher.Chain(ctx, res.ChainID)
	require.NoError(t, err)
	require.Equal(t, client.ChainCancelled, ch.Status)
	require.True(t, client.ChainEnded(ch.Status))
	require.NotNil(t, ch.FinishedAt)
	for _, s := range ch.Steps {
		require.Equal(t, client.ChainCancelled, s.Status, "step %s: cancelling a chain cancels every step", s.StepID)
	}
	parent, err := dispatcher.Get(ctx, res.JobID)
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, parent.Status)
	planRun, err := dispatcher.Get(ctx, step(t, ch, "plan").JobID)
	require.NoError(t, err)
	require.Equal(t, client.StatusCancelled, planRun.Status, "the queued step's run is cancelled with it")

	_, err = dispatcher.CancelChain(ctx, res.ChainID)
	require.ErrorIs(t, err, client.ErrChainAlreadyFinished)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusConflict, ae.Status)

	// A rerun is never retried: a retry could start two chains.
	b.fail.Store(1)
	path = "/api/v1/chains/" + res.ChainID + "/rerun"
	before = b.requests(path)
	_, err = dispatcher.RerunChain(ctx, res.ChainID)
	require.ErrorIs(t, err, client.ErrDatabaseUnavailable)
	require.Equal(t, before+1, b.requests(path))

	// Nothing completed, so nothing is reused: every step runs again.
	again, err := dispatcher.RerunChain(ctx, res.ChainID)
	require.NoError(t, err)
	require.NotEqual(t, res.ChainID, again.ChainID)
	require.NotEqual(t, res.JobID, again.JobID)
	require.Equal(t, res.ChainID, again.RerunOf)
	require.Equal(t, client.ChainRunning, again.Status)
	require.Empty(t, again.Reused)
	ch = rootDispatched(t, dispatcher, again.ChainID)
	require.Equal(t, res.ChainID, ch.RerunOf)
	require.Equal(t, again.JobID, ch.JobID)
	require.Equal(t, string(client.StatusQueued), step(t, ch, "plan").Status)

	_, err = dispatcher.CancelChain(ctx, uuid.NewString())
	require.ErrorIs(t, err, client.ErrChainNotFound)
	_, err = dispatcher.RerunChain(ctx, uuid.NewString())
	require.ErrorIs(t, err, client.ErrChainNotFound)
}

func TestWatchChainFollowsUntilTheChainEnds(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"websocket", "polling"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var opts []client.Option
			if mode == "polling" {
				opts = append(opts, client.WithPollingOnly())
			}
			c := b.client(b.create(auth.RoleAdmin), opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := startChain(t, c, chainSkill(t, c))

			// The root's dispatch comes from the journal; the cancellation arrives live.
			seqs := map[string][]int64{}
			var events []client.Event
			var planRun string
			for e, err := range c.WatchChain(ctx, res.ChainID, nil) {
				require.NoError(t, err)
				events = append(events, e)
				seqs[e.JobID] = append(seqs[e.JobID], e.Seq)
				if d, ok := e.ChainData(); ok && e.Type == "chain:step_dispatched" && d.StepID == "plan" {
					require.Equal(t, res.ChainID, d.ChainID)
					require.Equal(t, res.JobID, e.JobID, "chain events are journaled on the parent run")
					require.Equal(t, 1, d.Attempt)
					planRun = d.JobID
					_, err := c.CancelChain(ctx, res.ChainID)
					require.NoError(t, err)
				}
			}
			require.NotEmpty(t, planRun, "the root's dispatch was seen")
			last := events[len(events)-1]
			require.Equal(t, res.JobID, last.JobID, "the parent run's end ends the watch")
			require.Equal(t, "job:cancelled", last.Type)
			require.Contains(t, seqs, planRun, "the step run's own events are relayed")
			for run, s := range seqs {
				require.Equal(t, int64(1), s[0], "run %s: from the start of its journal", run)
				for i := 1; i < len(s); i++ {
					require.Equal(t, s[i-1]+1, s[i], "run %s: in order without gaps: %v", run, s)
				}
			}

			if mode == "websocket" {
				require.Equal(t, 1, b.requests("/api/v1/stream"))
				require.Zero(t, b.requests("/api/v1/dispatch/"+res.JobID+"/events"), "the socket carried every event")
				require.Zero(t, b.requests("/api/v1/dispatch/"+planRun+"/events"))
			} else {
				require.Zero(t, b.requests("/api/v1/stream"))
				require.Positive(t, b.requests("/api/v1/dispatch/"+res.JobID+"/events"))
				require.Positive(t, b.requests("/api/v1/dispatch/"+planRun+"/events"))
			}

			// Resuming after what was seen repeats nothing and ends: the chain has ended.
			after := map[string]int64{}
			for run, s := range seqs {
				after[run] = s[len(s)-1]
			}
			for e, err := range c.WatchChain(ctx, res.ChainID, after) {
				require.NoError(t, err)
				require.Greater(t, e.Seq, after[e.JobID], "an event seen before is not repeated: %+v", e)
			}
		})
	}
}

func TestWatchChainReportsAMissingChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got error
	for _, err := range b.admin.WatchChain(ctx, uuid.NewString(), nil) {
		got = err
	}
	require.ErrorIs(t, got, client.ErrChainNotFound)
}

// TestChainDataDecodesChainEvents needs no dispatcher: the event data shapes of
// shared/event.
func TestChainDataDecodesChainEvents(t *testing.T) {
	t.Parallel()
	d, ok := client.Event{Type: "chain:step_dispatched", Data: json.RawMessage(`{"chainId":"c","stepId":"analyse",
		"instance":2,"jobId":"j","jobType":"demo_llm","status":"held_for_review","dependsOn":["plan"],"attempt":2}`)}.ChainData()
	require.True(t, ok)
	require.Equal(t, "analyse", d.StepID)
	require.Equal(t, 2, *d.Instance)
	require.Equal(t, "held_for_review", d.Status)
	require.Equal(t, []string{"plan"}, d.DependsOn)
	require.Equal(t, 2, d.Attempt)

	d, ok = client.Event{Type: "chain:progress", Data: json.RawMessage(`{"chainId":"c","progress":0.5,"completed":2,
		"total":4,"costUsd":0.25,"status":"running"}`)}.ChainData()
	require.True(t, ok)
	require.Equal(t, 0.5, d.Progress)
	require.Equal(t, 4, d.Total)
	require.Equal(t, 0.25, d.CostUSD)

	_, ok = client.Event{Type: "job:completed", Data: json.RawMessage(`{}`)}.ChainData()
	require.False(t, ok)
}
