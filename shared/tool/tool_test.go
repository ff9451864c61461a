package tool_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/testkit"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

func TestCatalogueInstallAndOffered(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	var dev, other string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ('dev', 'Dev') RETURNING id`).Scan(&dev))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orgs (slug, name) VALUES ('other', 'Other') RETURNING id`).Scan(&other))

	tools, err := tool.LoadDir(filepath.Join("..", "..", "tools"))
	require.NoError(t, err)
	names := map[string]tool.Tool{}
	for _, tl := range tools {
		names[tl.Name] = tl
		require.NoError(t, tool.Install(ctx, pool, tl))
	}
	require.Contains(t, names, "create_ticket")
	require.True(t, names["create_ticket"].SideEffecting)
	require.True(t, names["create_ticket"].HonoursIdempotencyKey, "the demo tool answers a repeated key with its first ticket")
	require.False(t, names["demo_weather"].HonoursIdempotencyKey)
	require.Equal(t, tool.KindBuiltin, names[tool.HTTPRequest].Kind)
	require.JSONEq(t, `["title","priority"]`, string(mustField(t, names["create_ticket"].Parameters, "required")))

	// A tool granted to one organisation only.
	secret := tool.Tool{Name: "secret", Description: "d", URLTemplate: "https://x.example/{id}", Grants: []string{"other"}}
	require.NoError(t, tool.Install(ctx, pool, secret))

	offered, err := tool.Offered(ctx, pool, dev, []string{"create_ticket", "secret", "missing"})
	require.NoError(t, err)
	require.Len(t, offered, 1)
	require.Equal(t, "create_ticket", offered[0].Name)
	require.Equal(t, 10000, offered[0].TimeoutMS)
	require.True(t, offered[0].HonoursIdempotencyKey, "the registry keeps the declaration")
	offered, err = tool.Offered(ctx, pool, other, []string{"create_ticket", "secret"})
	require.NoError(t, err)
	require.Len(t, offered, 2)

	require.NoError(t, tool.Revoke(ctx, pool, "create_ticket", dev))
	offered, err = tool.Offered(ctx, pool, dev, []string{"create_ticket"})
	require.NoError(t, err)
	require.Empty(t, offered)
}

func TestParseRejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	for _, y := range []string{
		"name: x\ndescription: d\nurl_tempate: http://a\n", // typo: unknown field
		"name: x\ndescription: d\n",                        // http tool without URL
		"name: x\nurl_template: http://a\n",                // no description
		"name: x\ndescription: d\nkind: builtin\n",         // unknown builtin
		"name: x\ndescription: d\nurl_template: http://a\nmethod: TRACE\n",
		"name: x\ndescription: d\nurl_template: http://a\nhonours_idempotency_key: true\n", // not side-effecting
	} {
		_, err := tool.Parse([]byte(y))
		require.Error(t, err, y)
	}
	tl, err := tool.Parse([]byte("name: x\ndescription: d\nurl_template: http://a\n"))
	require.NoError(t, err)
	require.Equal(t, "POST", tl.Method)
	require.Equal(t, tool.DefaultTimeout, tl.Timeout())
}

func mustField(t *testing.T, raw []byte, field string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	b, err := json.Marshal(m[field])
	require.NoError(t, err)
	return b
}
