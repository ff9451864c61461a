package tier

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	openai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// announceRun runs an autonomous skill on j to its end, attempt after attempt (approving
// the reviews asked for), each attempt's events written when it ends unless it crashed;
// it returns how many attempts crashed.
func announceRun(t *testing.T, j *journal, block string, script map[string]openai.ChatCompletionMessage,
	reviews map[string]Review) (Outcome, int) {
	t.Helper()
	crashes := 0
	for attempt := 0; attempt < 6; attempt++ {
		env, job := agentSetup(j, block, script)
		maps.Copy(env.reviews, reviews)
		out, err := Autonomous(context.Background(), env, job)
		if errors.Is(err, errCrash) {
			crashes++
			continue
		}
		require.NoError(t, err)
		env.flush()
		if out.Status != run.PendingReview {
			return out, crashes
		}
	}
	t.Fatal("the run did not end")
	return Outcome{}, crashes
}

// TestAnnouncementsAreWrittenOnceAcrossCrashes kills an autonomous run after each of its
// journal entries — once before the events that follow the entry are written (the
// announcements of that answer are lost with the process), once after — and resumes it:
// the run's events then hold every announcement of the uninterrupted run exactly once,
// for the execute pattern and for a compete run's agents and judge.
func TestAnnouncementsAreWrittenOnceAcrossCrashes(t *testing.T) {
	t.Parallel()
	compete := scriptOf(oneStep(1, "A"), oneStep(2, "B"),
		map[string]openai.ChatCompletionMessage{"judge/try/1": jsonMsg(map[string]any{"chosen": 1, "reasoning": "A"})})
	for _, c := range []struct {
		name, block string
		script      map[string]openai.ChatCompletionMessage
		reviews     map[string]Review
	}{
		{"execute", "", everyPhase(), map[string]Review{"exec/2/iter/1/approval": {Decision: Approved}}},
		{"compete", `{"agent_pattern":"compete","agents":2}`, compete, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ref := newJournal()
			want, crashes := announceRun(t, ref, c.block, c.script, c.reviews)
			require.Zero(t, crashes)
			for k, n := range ref.announced {
				require.Equal(t, 1, n, k)
			}
			require.NotEmpty(t, ref.announced)
			entries := len(ref.asked)
			for crash := 1; crash < entries; crash++ {
				for _, lose := range []bool{true, false} {
					t.Run(fmt.Sprintf("crash after entry %d, events lost %v", crash, lose), func(t *testing.T) {
						t.Parallel()
						j := newJournal()
						j.crashAt, j.loseEvents = crash, lose
						out, crashes := announceRun(t, j, c.block, c.script, c.reviews)
						require.Equal(t, 1, crashes)
						require.Equal(t, want, out)
						require.Equal(t, ref.announced, j.announced, "every announcement, each once")
					})
				}
			}
		})
	}
}
