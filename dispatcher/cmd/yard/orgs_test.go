package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/bootstrap"
)

func TestOrgsCreateAdminKeySuspendResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	op, _, err := auth.CreateOperator(ctx, b.pool, "ops", "test")
	require.NoError(t, err)
	asOp := func(args ...string) result { return b.yard("", append([]string{"--key", op}, args...)...) }

	r := asOp("orgs", "create", "beta", "--name", "Beta", "--jurisdiction", "mars", "--org-rpm", "-1")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "VALIDATION_FAILED")
	require.Contains(t, r.stderr, "jurisdiction")
	require.Contains(t, r.stderr, "orgRpm")

	r = asOp("orgs", "create", "beta", "--name", "Beta", "--jurisdiction", "eu", "--cost-budget", "12.5", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var org client.Org
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &org), r.stdout)
	require.Equal(t, "beta", org.Slug)
	require.InDelta(t, 12.5, *org.MonthlyCostBudgetUSD, 1e-9)
	_, err = bootstrap.LoadSkills(ctx, b.pool, org.ID, catalogue, "test")
	require.NoError(t, err)

	r = asOp("orgs", "admin-key", "beta", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var key client.CreatedKey
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &key), r.stdout)
	require.Equal(t, []string{"admin"}, key.Roles)
	asBeta := func(args ...string) result { return b.yard("", append([]string{"--key", key.Secret}, args...)...) }
	r = asBeta("dispatch", "demo_llm", "--prompt", "hi")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = asOp("orgs", "suspend", "beta", "--reason", "unpaid")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "suspended by key:ops: unpaid")
	require.Contains(t, r.stdout, "1 run(s) or chain(s) cancelled")
	r = asBeta("dispatch", "demo_llm", "--prompt", "hi")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "ORG_SUSPENDED")

	r = asOp("orgs", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `beta\s+Beta\s+eu\s+suspended\s+none\s+\$12\.50`, r.stdout)
	r = asOp("orgs", "resume", "beta")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = asBeta("dispatch", "demo_llm", "--prompt", "hi")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = asOp("orgs", "set", "beta", "--clear-cost-budget", "--token-quota", "9000", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &org), r.stdout)
	require.Nil(t, org.MonthlyCostBudgetUSD)
	require.EqualValues(t, 9000, *org.MonthlyTokenQuota)

	r = asOp("orgs", "show", "beta")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `(?s)create .*admin_key .*suspend .*by key:ops: unpaid.*resume .*update `, r.stdout)

	// An organisation's admin key is no operator's.
	r = b.yard("", "orgs", "list")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "FORBIDDEN")
	r = asOp("orgs", "list", "-o", "json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var orgs []client.Org
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &orgs))
	require.Len(t, orgs, 2)
}
