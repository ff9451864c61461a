package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/routerclient"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

func helloSkill() skill.Skill {
	return skill.Skill{JobType: "hello", ExecutionType: "llm_only", MaxTokens: 16}
}

// A router error another attempt may change puts the run back to queued with the attempt's
// error and hands the error to asynq, which delivers the task again; the next delivery
// completes the run.
func TestRetryableRouterErrorIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi")})
	b.router.fail("llm/1", providerUnavailable())
	runID := b.newRun(t, helloSkill())

	err := b.handle(withDelivery(context.Background(), 0, 4), runID)
	re, ok := errors.AsType[*routerclient.Error](err)
	require.True(t, ok, "asynq gets the router's error: %v", err)
	require.Equal(t, apierr.CodeProviderUnavailable, re.Code)
	rr := b.run(t, runID)
	require.Equal(t, "queued", rr.Status)
	require.Len(t, rr.AttemptErrors, 1)
	require.Equal(t, apierr.CodeProviderUnavailable, rr.AttemptErrors[0]["code"])
	require.Nil(t, rr.Error, "not the run's final error")
	require.Contains(t, b.events(t, runID), "job:retrying")
	require.Zero(t, rr.LLMCalls, "a refused call is not billed")

	require.NoError(t, b.handle(withDelivery(context.Background(), 1, 4), runID))
	rr = b.run(t, runID)
	require.Equal(t, "completed", rr.Status)
	require.Equal(t, 2, b.router.count("llm/1"))
	require.Equal(t, 1, rr.LLMCalls)
}

// Router answers that end the run instead of retrying or parking it: one no retry can
// change (whatever retries are left), a retryable one on the last delivery the run's retry
// budget allows, and a wait for capacity past the maximum queue time. The run's end is
// recorded, asynq is told nothing failed, and the router was asked once.
func TestRouterErrorsThatEndTheRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		refusal      *apierr.Error
		retried      int
		status, code string
	}{
		{"permanent", budgetExceeded(), 0, "failed", apierr.CodeBudgetExceeded},
		// asynq's maximum is the run's budget plus one (queue.RetryBudget): 4 is a budget of 3.
		{"retryable on the last retry", providerUnavailable(), 3, "failed", apierr.CodeProviderUnavailable},
		// MaxQueueTime is a minute below.
		{"wait past the maximum queue time", rateLimitWait(2 * time.Minute), 0, "timed_out", apierr.CodeRateLimitQueueTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]openai.ChatCompletionMessage{"llm/1": text("hi")})
			b.runner.MaxQueueTime = time.Minute
			b.router.fail("llm/1", c.refusal)
			runID := b.newRun(t, helloSkill())

			require.NoError(t, b.handle(withDelivery(context.Background(), c.retried, 4), runID))
			rr := b.run(t, runID)
			require.Equal(t, c.status, rr.Status)
			require.Equal(t, c.code, rr.Error["code"])
			require.Equal(t, 1, b.router.count("llm/1"))
			require.Equal(t, "job:failed", last(b.events(t, runID)))
		})
	}
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}
