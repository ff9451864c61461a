package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/queue"
	"github.com/switchyard-ai/switchyard/shared/run"
)

func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(b.t, err)
}

func (b *bundle) accepted(key, body string) string {
	b.t.Helper()
	code, res := b.do(key, http.MethodPost, "/api/v1/dispatch", body)
	require.Equal(b.t, http.StatusAccepted, code, "%v", res)
	return res["jobId"].(string)
}

func TestRunsReferenceOneSnapshotPerSkillVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, second := b.accepted(b.key, demo), b.accepted(b.key, demo)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM skill_snapshots`))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM runs r JOIN skill_snapshots s ON s.digest = r.skill_snapshot_digest
		WHERE r.id IN ($1, $2) AND r.skill_snapshot IS NULL AND s.org_id = r.org_id
		AND s.snapshot->>'job_type' = 'demo_llm' AND (s.snapshot->>'version')::int = 1`, first, second),
		"both runs reference the one snapshot and carry no copy")

	admin := b.newKey(auth.RoleSkillsAdmin, auth.RoleDispatch)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/demo_llm", `{"job_type":"demo_llm",
		"execution_type":"llm_only","system_prompt":"Answer like a pirate."}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	third := b.accepted(admin, demo)
	require.Equal(t, 2, b.count(`SELECT count(*) FROM skill_snapshots`), "a new version is a new snapshot")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs r JOIN skill_snapshots s ON s.digest = r.skill_snapshot_digest
		WHERE r.id = $1 AND (s.snapshot->>'version')::int = 2
		AND s.snapshot->>'system_prompt' = 'Answer like a pirate.'`, third))
}

// TestSnapshotOutlivesItsSkill is the point of storing snapshots apart from the registry: a
// run's snapshot is its audit record, and deleting the skill (which takes its history with
// it) must not take the record of how its runs were dispatched.
func TestSnapshotOutlivesItsSkill(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.newKey(auth.RoleSkillsAdmin, auth.RoleDispatch)
	code, res := b.do(admin, http.MethodPut, "/api/v1/skills/demo_critical", `{"job_type":"demo_critical",
		"execution_type":"llm_only","risk_level":"critical","timeout_seconds":77,"max_retries":5,
		"cost_ceiling_usd":1.5}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	id := b.accepted(admin, `{"job_type":"demo_critical","payload":{"prompt":"pay 10 EUR"}}`)

	b.exec(`DELETE FROM skills WHERE org_id = $1 AND job_type = 'demo_critical'`, b.orgID)
	require.Zero(t, b.count(`SELECT count(*) FROM skill_history WHERE org_id = $1 AND job_type = 'demo_critical'`, b.orgID))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM runs WHERE id = $1 AND skill_id IS NULL`, id))

	// The review list shows what the run was dispatched with.
	approver := b.newKey(auth.RoleApprove)
	code, list := b.do(approver, http.MethodGet, "/api/v1/reviews", "")
	require.Equal(t, http.StatusOK, code)
	items := list["items"].([]any)
	require.Len(t, items, 1)
	item := items[0].(map[string]any)
	require.Equal(t, "critical", item["riskLevel"])
	require.Equal(t, 1.5, item["costCeilingUsd"])

	// Approval enqueues with the snapshot's timeout and retries, not the queue's defaults.
	code, res = b.do(approver, http.MethodPost, "/api/v1/dispatch/"+id+"/approve", `{"reason":"ok"}`)
	require.Equal(t, http.StatusOK, code, "%v", res)
	info, err := b.inspector.GetTaskInfo(queue.Tier("default", run.PriorityNormal), id)
	require.NoError(t, err)
	require.Equal(t, 5, queue.RetryBudget(info.MaxRetry))
	require.Equal(t, 77*time.Second, info.Timeout)
}

// TestSnapshotStoreFailureIsDatabaseUnavailable: when the snapshot cannot be stored the run
// is not written, and the client gets the 503 a failed run insert gives, never a 202.
func TestSnapshotStoreFailureIsDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`CREATE FUNCTION fail_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'skill_snapshots unavailable'; END; $$;
		CREATE TRIGGER fail_snapshot BEFORE INSERT ON skill_snapshots FOR EACH ROW EXECUTE FUNCTION fail_snapshot()`)
	code, res := b.dispatch(demo)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", res)
	require.Equal(t, "DATABASE_UNAVAILABLE", res["code"])
	require.NotContains(t, res["message"], "skill_snapshots", "internal error text never reaches a client")
	require.Zero(t, b.count(`SELECT count(*) FROM runs`))
	pending, err := queue.Pending(context.Background(), b.rdb, "default")
	require.NoError(t, err)
	require.Equal(t, []int64{0, 0, 0, 0}, pending, "nothing reached Redis")

	b.exec(`DROP TRIGGER fail_snapshot ON skill_snapshots`)
	b.accepted(b.key, demo)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM skill_snapshots`))
}

// TestSnapshotDeletedByHandIsStoredAgain: snapshots go only with their organisation, but one
// deleted by hand costs one failed dispatch per process, not every dispatch of its version.
func TestSnapshotDeletedByHandIsStoredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.accepted(b.key, demo)
	b.exec(`DELETE FROM runs`)
	b.exec(`DELETE FROM skill_snapshots`)
	code, res := b.dispatch(demo)
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", res)
	require.Equal(t, "DATABASE_UNAVAILABLE", res["code"])
	b.accepted(b.key, demo)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM skill_snapshots`))
}
