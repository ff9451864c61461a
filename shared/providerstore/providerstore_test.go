package providerstore_test

import (
	"context"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/providerstore"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func fields(t *testing.T, err error) []string {
	t.Helper()
	inv, ok := err.(*providerstore.InvalidError)
	require.True(t, ok, "want a validation error, got %v", err)
	var out []string
	for _, f := range inv.Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestSealedCredentialOpensOnlyWithTheRouterIdentityForItsProvider(t *testing.T) {
	t.Parallel()
	router, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	s, err := providerstore.NewSealer(router.Recipient().String())
	require.NoError(t, err)
	sealed, err := s.Seal("p1", "sk-abcdef1234")
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "sk-abcdef1234")

	key, err := providerstore.Open([]age.Identity{router}, "p1", sealed)
	require.NoError(t, err)
	require.Equal(t, "sk-abcdef1234", key)
	_, err = providerstore.Open([]age.Identity{router}, "p2", sealed)
	require.ErrorIs(t, err, providerstore.ErrNotForThisProvider, "a blob copied onto another provider does not open")
	other, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	_, err = providerstore.Open([]age.Identity{other}, "p1", sealed)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "sk-abcdef1234")
	_, err = providerstore.Open(nil, "p1", sealed)
	require.Error(t, err, "the sealer's side, holding only the public key, cannot open")

	_, err = providerstore.NewSealer("AGE-SECRET-KEY-1XYZ")
	require.Error(t, err)
	require.Equal(t, "1234", providerstore.Last4("sk-abcdef1234"))
}

func TestPolicyMustResolveWhenSaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := testkit.DB(t)
	org := testkit.NewOrg(t, db)

	_, _, err := providerstore.PutProvider(ctx, db, org, "Bad Name", apitypes.ProviderSpec{Kind: "nope",
		BaseURL: "ftp://x", Models: map[string]string{"fastest": "m"}})
	require.ElementsMatch(t, []string{"name", "kind", "baseUrl", "models.fastest"}, fields(t, err))
	_, _, err = providerstore.PutProvider(ctx, db, org, "local", apitypes.ProviderSpec{Kind: "openai_compatible"})
	require.Equal(t, []string{"baseUrl"}, fields(t, err))

	p, created, err := providerstore.PutProvider(ctx, db, org, "openai", apitypes.ProviderSpec{Kind: "openai",
		Models: map[string]string{"default": "gpt-4o-mini", "reasoning": "o3"}})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "global", p.Jurisdiction)
	require.True(t, p.Enabled)
	require.Nil(t, p.Credential)
	_, _, err = providerstore.PutProvider(ctx, db, org, "bare", apitypes.ProviderSpec{Kind: "anthropic"})
	require.NoError(t, err)

	pol, err := providerstore.PutPolicy(ctx, db, org, apitypes.RoutingPolicy{Rules: []apitypes.RoutingRule{
		{Hint: "default", Provider: "openai"}, {Hint: "reasoning", Provider: "openai"}}})
	require.NoError(t, err)
	require.Len(t, pol.Rules, 2)

	// A hint routed to a missing provider, or to one with no model for it, is refused as a
	// whole: the previous policy stays.
	_, err = providerstore.PutPolicy(ctx, db, org, apitypes.RoutingPolicy{Rules: []apitypes.RoutingRule{
		{Hint: "default", Provider: "openai"}, {Hint: "code", Provider: "missing"}}})
	require.Equal(t, []string{"rules[1].provider"}, fields(t, err))
	_, err = providerstore.PutPolicy(ctx, db, org, apitypes.RoutingPolicy{Rules: []apitypes.RoutingRule{
		{Hint: "fast", Provider: "bare"}}})
	require.Equal(t, []string{"rules[0].model"}, fields(t, err))
	_, err = providerstore.PutPolicy(ctx, db, org, apitypes.RoutingPolicy{Rules: []apitypes.RoutingRule{
		{Hint: "fast", Provider: "openai"}, {Hint: "fast", Provider: "openai"}}})
	require.Equal(t, []string{"rules[1].hint"}, fields(t, err))
	got, err := providerstore.GetPolicy(ctx, db, org)
	require.NoError(t, err)
	require.Equal(t, pol, got, "a refused policy changes nothing")

	// Changing a provider the policy uses so that it no longer resolves is refused too.
	off := false
	_, _, err = providerstore.PutProvider(ctx, db, org, "openai", apitypes.ProviderSpec{Kind: "openai",
		Models: map[string]string{"default": "gpt-4o-mini"}, Enabled: &off})
	require.Equal(t, []string{"enabled", "enabled"}, fields(t, err))
	_, _, err = providerstore.PutProvider(ctx, db, org, "openai", apitypes.ProviderSpec{Kind: "openai",
		Models: map[string]string{"reasoning": "o3"}})
	require.Equal(t, []string{"models.default"}, fields(t, err))
	p, err = providerstore.GetProvider(ctx, db, org, "openai")
	require.NoError(t, err)
	require.True(t, p.Enabled)
	require.Equal(t, "gpt-4o-mini", p.Models["default"])
	err = providerstore.DeleteProvider(ctx, db, org, "openai")
	require.Equal(t, []string{"name"}, fields(t, err))
	require.NoError(t, providerstore.DeleteProvider(ctx, db, org, "bare"))
	_, err = providerstore.GetProvider(ctx, db, org, "bare")
	require.IsType(t, &providerstore.NotFoundError{}, err)

	// Another organisation sees none of it.
	other := testkit.NewOrg(t, db)
	ps, err := providerstore.ListProviders(ctx, db, other)
	require.NoError(t, err)
	require.Empty(t, ps)
	_, err = providerstore.PutPolicy(ctx, db, other, apitypes.RoutingPolicy{Rules: []apitypes.RoutingRule{
		{Hint: "default", Provider: "openai"}}})
	require.Equal(t, []string{"rules[0].provider"}, fields(t, err))
}

func TestCredentialsLimitsAndPrices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := testkit.DB(t)
	org := testkit.NewOrg(t, db)
	_, _, err := providerstore.PutProvider(ctx, db, org, "openai", apitypes.ProviderSpec{Kind: "openai",
		Models: map[string]string{"default": "gpt-4o-mini"}})
	require.NoError(t, err)

	router, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	s, err := providerstore.NewSealer(router.Recipient().String())
	require.NoError(t, err)
	_, err = providerstore.SetCredential(ctx, db, s, org, "openai", "short", "key:admin")
	require.Equal(t, []string{"apiKey"}, fields(t, err))
	info, err := providerstore.SetCredential(ctx, db, s, org, "openai", "sk-proj-secret-7890", "key:admin")
	require.NoError(t, err)
	require.Equal(t, "7890", info.Last4)
	p, err := providerstore.GetProvider(ctx, db, org, "openai")
	require.NoError(t, err)
	require.Equal(t, "7890", p.Credential.Last4)
	require.Equal(t, "key:admin", p.Credential.SetBy)
	require.Nil(t, p.Credential.RevokedAt)
	var sealed []byte
	require.NoError(t, db.QueryRow(ctx, `SELECT ciphertext FROM provider_credentials WHERE provider_config_id = $1`, p.ID).Scan(&sealed))
	require.NotContains(t, string(sealed), "sk-proj-secret-7890")
	key, err := providerstore.Open([]age.Identity{router}, p.ID, sealed)
	require.NoError(t, err)
	require.Equal(t, "sk-proj-secret-7890", key)

	require.NoError(t, providerstore.RevokeCredential(ctx, db, org, "openai"))
	p, err = providerstore.GetProvider(ctx, db, org, "openai")
	require.NoError(t, err)
	require.NotNil(t, p.Credential.RevokedAt)
	require.NoError(t, db.QueryRow(ctx, `SELECT ciphertext FROM provider_credentials WHERE provider_config_id = $1`, p.ID).Scan(&sealed))
	require.Empty(t, sealed, "a revoked key is wiped")
	require.IsType(t, &providerstore.NotFoundError{}, providerstore.RevokeCredential(ctx, db, org, "openai"))

	_, err = providerstore.PutLimit(ctx, db, org, "openai", "gpt-4o-mini", apitypes.LimitSet{RPM: 500, TPM: 200000})
	require.NoError(t, err)
	ls, err := providerstore.ListLimits(ctx, db, org)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, 500, ls[0].RPM)
	_, err = providerstore.PutLimit(ctx, db, org, "nope", "m", apitypes.LimitSet{RPM: 1})
	require.IsType(t, &providerstore.NotFoundError{}, err)
	require.NoError(t, providerstore.DeleteLimit(ctx, db, org, "openai", "gpt-4o-mini"))

	price := func(org, kind, model string) apitypes.Price {
		ps, err := providerstore.ListPrices(ctx, db, org)
		require.NoError(t, err)
		for _, p := range ps {
			if p.ProviderKind == kind && p.Model == model {
				return p
			}
		}
		return apitypes.Price{}
	}
	require.Equal(t, "default", price(org, "openai", "gpt-4o-mini").Source, "well-known models have a built-in price")
	require.InDelta(t, 0.15, price(org, "openai", "gpt-4o-mini").InputPerMTok, 1e-9)
	_, err = providerstore.PutPrice(ctx, db, org, "openai", "gpt-4o-mini", apitypes.PriceSet{InputPerMTok: 0.1, OutputPerMTok: 0.5})
	require.NoError(t, err)
	require.Equal(t, "org", price(org, "openai", "gpt-4o-mini").Source)
	other := testkit.NewOrg(t, db)
	require.Equal(t, "default", price(other, "openai", "gpt-4o-mini").Source, "an organisation's price is its own")
	_, err = providerstore.PutPrice(ctx, db, org, "openai", "m", apitypes.PriceSet{InputPerMTok: -1})
	require.Equal(t, []string{"inputPerMTok"}, fields(t, err))
	require.NoError(t, providerstore.DeletePrice(ctx, db, org, "openai", "gpt-4o-mini"))
	require.Equal(t, "default", price(org, "openai", "gpt-4o-mini").Source)
}
