package tier

import (
	"context"
	"encoding/json"
)

// Snapshots is what an Env offers when it can keep an agent's state between attempts. It is
// optional: an Env without it (or a snapshot the agent cannot use) means a resumed agent
// rebuilds its state by replaying every journaled answer, which gives the same state.
type Snapshots interface {
	// LoadSnapshot returns the newest state saved under key and its seq; ok is false when
	// there is none (always, for a run's first attempt).
	LoadSnapshot(ctx context.Context, key string) (seq int, state json.RawMessage, ok bool, err error)
	// SaveSnapshot keeps state as the snapshot seq of key, unless a higher seq is kept
	// already. It may be written later (with the attempt's next write): a snapshot only
	// folds answers that are journaled already, so losing one costs replay, not correctness.
	SaveSnapshot(ctx context.Context, key string, seq int, state json.RawMessage)
}

// agentSnapshotVersion is the format of agentState. Change it whenever the state or the way
// the agent folds answers into it changes: a snapshot of another version is ignored, and
// the run is replayed from its journal instead.
const agentSnapshotVersion = 1

// agentState is an agent's state after a reflection, as a pure function of the journaled
// answers up to it: what the agent needs to carry on from the next step without replaying
// the steps before. seq is the number of steps executed (len(Done)).
type agentState struct {
	Version      int        `json:"v"`
	SkillVersion int        `json:"skill_version"`
	Plans        int        `json:"plans"`
	Replans      int        `json:"replans"`
	Remaining    []planStep `json:"remaining"`
	Done         []doneStep `json:"done"`
	// LastOutput is the last executed step's full result, which the goal evaluation shows.
	LastOutput string `json:"last_output"`
}

// snapshotKey is the key of an agent's snapshot. The agent's scoped Env puts it under the
// agent's journal key prefix, as its other keys: "snapshot" for the execute pattern,
// "agent/<i>/snapshot" for a pattern's i-th agent, one per agent of a run.
const snapshotKey = "snapshot"

// LoadSnapshot gives an agent the snapshots of the Env under it, under its prefix; an Env
// that keeps none has none to give.
func (s *scoped) LoadSnapshot(ctx context.Context, key string) (int, json.RawMessage, bool, error) {
	inner, ok := s.Env.(Snapshots)
	if !ok {
		return 0, nil, false, nil
	}
	return inner.LoadSnapshot(ctx, s.prefix+key)
}

// SaveSnapshot keeps an agent's snapshot in the Env under it, under its prefix; an Env that
// keeps none drops it.
func (s *scoped) SaveSnapshot(ctx context.Context, key string, seq int, state json.RawMessage) {
	if inner, ok := s.Env.(Snapshots); ok {
		inner.SaveSnapshot(ctx, s.prefix+key, seq, state)
	}
}

// snapshot saves the agent's state after its latest reflection (and the adjustment or
// replan that followed), when the Env keeps snapshots.
func (a *agent) snapshot(ctx context.Context) {
	s, ok := a.env.(Snapshots)
	if !ok || len(a.done) == 0 {
		return
	}
	st := agentState{Version: agentSnapshotVersion, SkillVersion: a.job.Skill.Version, Plans: a.plans,
		Replans: a.replans, Remaining: a.remaining, Done: a.done, LastOutput: a.done[len(a.done)-1].output}
	raw, err := json.Marshal(st)
	if err != nil {
		return // cannot happen for these types; without a snapshot the run replays
	}
	s.SaveSnapshot(ctx, snapshotKey, len(a.done), raw)
}

// restore sets the agent's state from its newest usable snapshot and reports whether it
// did. A snapshot that is missing, unreadable, of another format or skill version, or not
// consistent with itself is not used: the agent replays its journal from the start.
func (a *agent) restore(ctx context.Context) bool {
	s, ok := a.env.(Snapshots)
	if !ok {
		return false
	}
	seq, raw, ok, err := s.LoadSnapshot(ctx, snapshotKey)
	if err != nil || !ok {
		return false
	}
	var st agentState
	if json.Unmarshal(raw, &st) != nil || !st.usable(seq, a.job.Skill.Version, a.cfg.MaxSteps) {
		return false
	}
	a.plans, a.replans, a.remaining, a.done = st.Plans, st.Replans, st.Remaining, st.Done
	a.done[len(a.done)-1].output = st.LastOutput
	return true
}

// usable checks what a snapshot must be to stand for the replay of its journal.
func (st agentState) usable(seq, skillVersion, maxSteps int) bool {
	if st.Version != agentSnapshotVersion || st.SkillVersion != skillVersion || seq < 1 || len(st.Done) != seq ||
		seq > maxSteps || st.Plans < 1 || st.Replans < 0 || st.Replans >= st.Plans {
		return false
	}
	for i, d := range st.Done {
		if d.N != i+1 || d.StepID == "" {
			return false
		}
	}
	for _, p := range st.Remaining {
		if p.StepID == "" {
			return false
		}
	}
	return true
}
