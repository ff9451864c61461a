package dispatch

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func orgBatch(slug string) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO orgs (slug, name) VALUES ($1, $1)`, slug)
	return b
}

func TestGroupFailureStaysWithItsDispatch(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	c := &committer{db: pool}
	group := []*pendingRecord{
		{ctx: ctx, b: orgBatch("first-org"), done: make(chan error, 1)},
		{ctx: ctx, b: orgBatch("Not A Valid Slug"), done: make(chan error, 1)},
		{ctx: ctx, b: orgBatch("third-org"), done: make(chan error, 1)},
	}
	c.write(group)
	require.NoError(t, <-group[0].done)
	require.Error(t, <-group[1].done, "the slug check fails this one only")
	require.NoError(t, <-group[2].done)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orgs WHERE slug IN ('first-org', 'third-org')`).Scan(&n))
	require.Equal(t, 2, n)
}

func TestConcurrentCommitsAllLand(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	var c committer
	defer c.stop()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range 200 {
		wg.Go(func() { errs[i] = c.commit(ctx, pool, orgBatch("org-"+string(rune('a'+i%26))+"-"+itoa(i))) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orgs`).Scan(&n))
	require.Equal(t, 200, n)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
