package main

import (
	"encoding/json"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	dispatcher "github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
)

func TestProviders(t *testing.T) {
	t.Parallel()
	router, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	sealer, err := providerstore.NewSealer(router.Recipient().String())
	require.NoError(t, err)
	b := setup(t, func(o *dispatcher.Options) { o.Sealer = sealer })

	r := b.yard("", "providers", "put", "openai", "--kind", "openai", "--model", "default=gpt-4o-mini", "--model", "reasoning=o3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "created provider openai")
	r = b.yard("", "providers", "put", "local", "--kind", "openai_compatible")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "baseUrl", "validation names the field")

	r = b.yard("sk-12\n", "providers", "set-key", "openai")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "apiKey", "validation names the field")
	require.NotContains(t, r.stderr+r.stdout, "sk-12", "and never echoes the key")

	const key = "sk-proj-cli-secret-4321"
	r = b.yard(key+"\n", "providers", "set-key", "openai")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "key …4321 set for openai")
	r = b.yard("", "providers", "list")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "…4321")
	require.NotContains(t, r.stdout, key)
	r = b.yard("", "providers", "list", "-o", "json")
	require.NotContains(t, r.stdout, key)
	var ps []client.Provider
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ps))
	require.Len(t, ps, 1)
	require.Equal(t, "age", ps[0].Credential.Scheme)

	r = b.yard("", "providers", "routing", "set", "default=openai", "code=missing")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "rules[1].provider")
	r = b.yard("", "providers", "routing", "set", "default=openai", "reasoning=openai:o3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "reasoning")
	r = b.yard("", "providers", "put", "openai", "--kind", "openai", "--model", "default=gpt-4o-mini", "--disabled")
	require.Equal(t, exitError, r.code, "disabling a provider the policy uses is refused")
	require.Contains(t, r.stderr, "enabled")

	r = b.yard("", "providers", "limits", "set", "openai", "gpt-4o-mini", "--rpm", "500", "--tpm", "200000")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = b.yard("", "providers", "limits")
	require.Contains(t, r.stdout, "200000")
	r = b.yard("", "providers", "prices", "set", "openai", "gpt-4o-mini", "--input", "0.1", "--output", "0.4")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = b.yard("", "providers", "prices")
	require.Equal(t, exitOK, r.code, r.stderr)
	var line string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "gpt-4o-mini") && strings.HasPrefix(l, "openai ") {
			line = l
		}
	}
	require.Contains(t, line, "org")
	require.Contains(t, r.stdout, "claude-sonnet-4-5", "built-in defaults are listed")

	r = b.yard("", "providers", "revoke-key", "openai")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = b.yard("", "providers", "list")
	require.Contains(t, r.stdout, "revoked")
	r = b.yard("", "providers", "set-key", "openai")
	require.Equal(t, exitUsage, r.code, "an empty key is refused")
}
