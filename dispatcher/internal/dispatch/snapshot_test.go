package dispatch

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// failSnapshotInserts makes every insert into skill_snapshots fail, as an unreachable
// database would, until the returned function is called.
func failSnapshotInserts(t *testing.T, pool *pgxpool.Pool) (restore func()) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE FUNCTION fail_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'skill_snapshots unavailable'; END; $$;
		CREATE TRIGGER fail_snapshot BEFORE INSERT ON skill_snapshots FOR EACH ROW EXECUTE FUNCTION fail_snapshot()`)
	require.NoError(t, err)
	return func() {
		_, err := pool.Exec(ctx, `DROP TRIGGER fail_snapshot ON skill_snapshots; DROP FUNCTION fail_snapshot()`)
		require.NoError(t, err)
	}
}

func snapshotRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM skill_snapshots`).Scan(&rows))
	return rows
}

func TestSnapshotStoredOncePerProcess(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	snap := newSnapshot(t, testkit.NewOrg(t, pool))
	var set snapshots
	const n = 32
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = set.ensure(ctx, pool, snap) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err, "concurrent first dispatches of a version all see it stored")
	}
	require.Equal(t, 1, snapshotRows(t, pool))

	// Once stored, the snapshot costs no statement: an insert would fail now.
	defer failSnapshotInserts(t, pool)()
	require.NoError(t, set.ensure(ctx, pool, snap))
	var fresh snapshots
	require.Error(t, fresh.ensure(ctx, pool, snap), "another process does insert (and so fails here)")
}

func TestFailedSnapshotInsertIsNotRemembered(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	snap := newSnapshot(t, testkit.NewOrg(t, pool))
	var set snapshots
	restore := failSnapshotInserts(t, pool)
	require.ErrorContains(t, set.ensure(ctx, pool, snap), "skill_snapshots unavailable")
	restore()
	require.NoError(t, set.ensure(ctx, pool, snap), "the next dispatch tries again")
	require.Equal(t, 1, snapshotRows(t, pool))

	// A snapshot deleted behind the process's back is stored again once forgotten.
	_, err := pool.Exec(ctx, `DELETE FROM skill_snapshots`)
	require.NoError(t, err)
	set.forget(snap.Digest)
	require.NoError(t, set.ensure(ctx, pool, snap))
	require.Equal(t, 1, snapshotRows(t, pool))
}
