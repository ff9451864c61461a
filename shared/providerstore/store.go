// Package providerstore owns an organisation's provider settings in the registry:
// provider_configs, routing_policies, provider_limits, org_prices (over the platform's
// prices) and the sealed provider_credentials. The dispatcher's admin API writes through
// it; the router reads these tables (routing, pricing, credential, registry) and follows
// every change through the router_config_changed notifications their triggers send.
//
// Every change is one transaction under an advisory lock on the organisation, and ends by
// checking that the routing policy still resolves — every hint names an enabled provider
// with a model for it — so an unresolvable policy is refused when it is saved, naming the
// field, rather than at the first call.
package providerstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// DB is a pool or a transaction.
type DB interface {
	postgres.Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Hints are the routing hints of ARCHITECTURE.md; "default" also names a provider's
// default model.
var Hints = []string{"default", "fast", "reasoning", "code", "long_context", "creative"}

// Kinds are the provider kinds the router has adapters for.
var Kinds = []string{"openai", "openrouter", "openai_compatible", "anthropic", "gemini"}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// NotFoundError is a provider (or a credential, limit or price) the organisation does not have.
type NotFoundError struct {
	What string // provider, credential, limit, price
	Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s %q in the organisation", e.What, e.Name)
}

// InvalidError is a change refused by validation, naming each failing field.
type InvalidError struct{ Fields []apitypes.FieldError }

func (e *InvalidError) Error() string {
	if len(e.Fields) == 0 {
		return "invalid"
	}
	return e.Fields[0].Field + ": " + e.Fields[0].Message
}

func invalid(field, rule, msg string) *InvalidError {
	return &InvalidError{Fields: []apitypes.FieldError{{Field: field, Rule: rule, Message: msg}}}
}

// inTx runs f in one transaction holding the organisation's provider lock.
func inTx(ctx context.Context, db DB, orgID string, f func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('providers:' || $1::text, 0))`, orgID); err != nil {
			return err
		}
		return f(tx)
	})
}

const providerColumns = `pc.id, pc.name, pc.kind, pc.base_url, pc.jurisdiction, pc.models, pc.enabled, pc.created_at,
	pc.updated_at, c.last4, c.created_at, c.set_by, c.scheme, c.revoked_at`

func scanProvider(row pgx.CollectableRow) (apitypes.Provider, error) {
	var p apitypes.Provider
	var models []byte
	var last4, setBy, scheme *string
	var setAt, revokedAt *time.Time
	if err := row.Scan(&p.ID, &p.Name, &p.Kind, &p.BaseURL, &p.Jurisdiction, &models, &p.Enabled, &p.CreatedAt,
		&p.UpdatedAt, &last4, &setAt, &setBy, &scheme, &revokedAt); err != nil {
		return p, err
	}
	if err := json.Unmarshal(models, &p.Models); err != nil {
		return p, err
	}
	if setAt != nil {
		p.Credential = &apitypes.CredentialInfo{Last4: *last4, SetAt: *setAt, SetBy: *setBy, Scheme: *scheme, RevokedAt: revokedAt}
	}
	return p, nil
}

// ListProviders returns the organisation's providers by name.
func ListProviders(ctx context.Context, db postgres.Querier, orgID string) ([]apitypes.Provider, error) {
	rows, err := db.Query(ctx, `SELECT `+providerColumns+` FROM provider_configs pc
		LEFT JOIN provider_credentials c ON c.provider_config_id = pc.id
		WHERE pc.org_id = $1 ORDER BY pc.name`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing providers: %w", err)
	}
	ps, err := pgx.CollectRows(rows, scanProvider)
	if err != nil {
		return nil, fmt.Errorf("listing providers: %w", err)
	}
	return ps, nil
}

// GetProvider returns one provider by name.
func GetProvider(ctx context.Context, db postgres.Querier, orgID, name string) (apitypes.Provider, error) {
	rows, err := db.Query(ctx, `SELECT `+providerColumns+` FROM provider_configs pc
		LEFT JOIN provider_credentials c ON c.provider_config_id = pc.id
		WHERE pc.org_id = $1 AND pc.name = $2`, orgID, name)
	if err != nil {
		return apitypes.Provider{}, fmt.Errorf("reading provider %q: %w", name, err)
	}
	p, err := pgx.CollectExactlyOneRow(rows, scanProvider)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, &NotFoundError{What: "provider", Name: name}
	}
	if err != nil {
		return p, fmt.Errorf("reading provider %q: %w", name, err)
	}
	return p, nil
}

// CheckProvider validates a provider's name and spec, naming each failing field.
func CheckProvider(name string, spec apitypes.ProviderSpec) error {
	var fs []apitypes.FieldError
	add := func(field, rule, msg string) {
		fs = append(fs, apitypes.FieldError{Field: field, Rule: rule, Message: msg})
	}
	if !nameRE.MatchString(name) {
		add("name", "providername", "must match ^[a-z0-9][a-z0-9_.-]{0,62}$")
	}
	if !slices.Contains(Kinds, spec.Kind) {
		add("kind", "oneof", "must be one of openai, openrouter, openai_compatible, anthropic, gemini")
	}
	if spec.Jurisdiction != "" && !slices.Contains([]string{"eu", "us", "global"}, spec.Jurisdiction) {
		add("jurisdiction", "oneof", "must be eu, us or global")
	}
	if spec.BaseURL != "" {
		u, err := url.Parse(spec.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("baseUrl", "httpurl", "must be an http(s) URL, e.g. https://api.openai.com/v1")
		} else if u.User != nil {
			add("baseUrl", "nouserinfo", "must not carry credentials; set the API key with PUT .../credential")
		}
	} else if spec.Kind == "openai_compatible" {
		add("baseUrl", "required", "an openai_compatible provider needs its base URL, e.g. http://vllm:8000/v1")
	}
	for _, role := range slices.Sorted(maps.Keys(spec.Models)) {
		if !slices.Contains(Hints, role) {
			add("models."+role, "oneof", "roles are default, fast, reasoning, code, long_context, creative")
		} else if m := spec.Models[role]; m == "" || len(m) > 200 {
			add("models."+role, "required", "must name a model (at most 200 characters)")
		}
	}
	if len(fs) > 0 {
		return &InvalidError{Fields: fs}
	}
	return nil
}

// PutProvider creates or changes the organisation's provider name. created is true when it
// did not exist. The change is refused when it leaves the routing policy unresolvable (a
// disabled provider or a removed model that a hint is routed to).
func PutProvider(ctx context.Context, db DB, orgID, name string, spec apitypes.ProviderSpec) (p apitypes.Provider, created bool, err error) {
	if err := CheckProvider(name, spec); err != nil {
		return p, false, err
	}
	models, _ := json.Marshal(cmpMap(spec.Models))
	enabled := spec.Enabled == nil || *spec.Enabled
	jur := spec.Jurisdiction
	if jur == "" {
		jur = "global"
	}
	err = inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models, enabled)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (org_id, name) DO UPDATE SET kind = EXCLUDED.kind, base_url = EXCLUDED.base_url,
				jurisdiction = EXCLUDED.jurisdiction, models = EXCLUDED.models, enabled = EXCLUDED.enabled, updated_at = now()
			RETURNING xmax = 0`, orgID, name, spec.Kind, spec.BaseURL, jur, models, enabled).Scan(&created); err != nil {
			return fmt.Errorf("writing provider %q: %w", name, err)
		}
		return checkPolicy(ctx, tx, orgID, func(hint, why string) apitypes.FieldError {
			field := "models." + hint
			if why == whyDisabled {
				field = "enabled"
			}
			return apitypes.FieldError{Field: field, Rule: "routable",
				Message: fmt.Sprintf("the routing policy routes %q to this provider, which then %s; change the policy first", hint, why)}
		})
	})
	if err != nil {
		return p, false, err
	}
	p, err = GetProvider(ctx, db, orgID, name)
	return p, created, err
}

func cmpMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// DeleteProvider removes a provider with its credential and limits. A provider the routing
// policy names is refused: route its hints elsewhere first.
func DeleteProvider(ctx context.Context, db DB, orgID, name string) error {
	return inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		var hints []string
		err := tx.QueryRow(ctx, `SELECT pc.id, COALESCE(array_agg(rp.hint ORDER BY rp.hint) FILTER (WHERE rp.hint IS NOT NULL), '{}')
			FROM provider_configs pc LEFT JOIN routing_policies rp ON rp.provider_config_id = pc.id
			WHERE pc.org_id = $1 AND pc.name = $2 GROUP BY pc.id`, orgID, name).Scan(new(string), &hints)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{What: "provider", Name: name}
		}
		if err != nil {
			return fmt.Errorf("reading provider %q: %w", name, err)
		}
		if len(hints) > 0 {
			return invalid("name", "unreferenced", fmt.Sprintf("the routing policy routes %v to this provider; route them elsewhere first", hints))
		}
		_, err = tx.Exec(ctx, `DELETE FROM provider_configs WHERE org_id = $1 AND name = $2`, orgID, name)
		return err
	})
}

const (
	whyMissing  = "does not exist"
	whyDisabled = "is disabled"
	whyNoModel  = "has no model for this hint and no default model"
)

// checkPolicy verifies that every hint of the organisation's policy names an enabled
// provider with a model for it; field names the field to blame for a hint that does not.
func checkPolicy(ctx context.Context, tx pgx.Tx, orgID string, field func(hint, why string) apitypes.FieldError) error {
	rows, err := tx.Query(ctx, `SELECT rp.hint, rp.model, pc.enabled, pc.models
		FROM routing_policies rp JOIN provider_configs pc ON pc.id = rp.provider_config_id
		WHERE rp.org_id = $1 AND pc.org_id = $1 ORDER BY rp.hint`, orgID)
	if err != nil {
		return fmt.Errorf("reading the routing policy: %w", err)
	}
	var fs []apitypes.FieldError
	var hint, model string
	var enabled bool
	var models map[string]string
	_, err = pgx.ForEachRow(rows, []any{&hint, &model, &enabled, &models}, func() error {
		switch {
		case !enabled:
			fs = append(fs, field(hint, whyDisabled))
		case model == "" && models[hint] == "" && models["default"] == "":
			fs = append(fs, field(hint, whyNoModel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the routing policy: %w", err)
	}
	if len(fs) > 0 {
		return &InvalidError{Fields: fs}
	}
	return nil
}

// GetPolicy returns the organisation's routing policy, hints in a fixed order.
func GetPolicy(ctx context.Context, db postgres.Querier, orgID string) (apitypes.RoutingPolicy, error) {
	rows, err := db.Query(ctx, `SELECT rp.hint, pc.name, rp.model FROM routing_policies rp
		JOIN provider_configs pc ON pc.id = rp.provider_config_id WHERE rp.org_id = $1`, orgID)
	if err != nil {
		return apitypes.RoutingPolicy{}, fmt.Errorf("reading the routing policy: %w", err)
	}
	rules, err := pgx.CollectRows(rows, pgx.RowToStructByPos[apitypes.RoutingRule])
	if err != nil {
		return apitypes.RoutingPolicy{}, fmt.Errorf("reading the routing policy: %w", err)
	}
	sort.Slice(rules, func(i, j int) bool {
		return slices.Index(Hints, rules[i].Hint) < slices.Index(Hints, rules[j].Hint)
	})
	return apitypes.RoutingPolicy{Rules: rules}, nil
}

// PutPolicy replaces the organisation's whole routing policy. Each rule must name an
// enabled provider of the organisation with a model for its hint (the rule's, the
// provider's for the hint, or its default); a hint may appear once.
func PutPolicy(ctx context.Context, db DB, orgID string, pol apitypes.RoutingPolicy) (apitypes.RoutingPolicy, error) {
	var fs []apitypes.FieldError
	seen := map[string]bool{}
	for i, r := range pol.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if !slices.Contains(Hints, r.Hint) {
			fs = append(fs, apitypes.FieldError{Field: f + ".hint", Rule: "oneof", Message: "must be one of default, fast, reasoning, code, long_context, creative"})
		} else if seen[r.Hint] {
			fs = append(fs, apitypes.FieldError{Field: f + ".hint", Rule: "unique", Message: fmt.Sprintf("hint %q appears twice", r.Hint)})
		}
		seen[r.Hint] = true
		if len(r.Model) > 200 {
			fs = append(fs, apitypes.FieldError{Field: f + ".model", Rule: "max", Message: "at most 200 characters"})
		}
	}
	if len(fs) > 0 {
		return apitypes.RoutingPolicy{}, &InvalidError{Fields: fs}
	}
	err := inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM routing_policies WHERE org_id = $1`, orgID); err != nil {
			return fmt.Errorf("replacing the routing policy: %w", err)
		}
		for i, r := range pol.Rules {
			tag, err := tx.Exec(ctx, `INSERT INTO routing_policies (org_id, hint, provider_config_id, model)
				SELECT $1, $2, id, $4 FROM provider_configs WHERE org_id = $1 AND name = $3`, orgID, r.Hint, r.Provider, r.Model)
			if err != nil {
				return fmt.Errorf("replacing the routing policy: %w", err)
			}
			if tag.RowsAffected() == 0 {
				fs = append(fs, apitypes.FieldError{Field: fmt.Sprintf("rules[%d].provider", i), Rule: "exists",
					Message: fmt.Sprintf("the organisation has no provider %q", r.Provider)})
			}
		}
		if len(fs) > 0 {
			return &InvalidError{Fields: fs}
		}
		index := map[string]int{}
		for i, r := range pol.Rules {
			index[r.Hint] = i
		}
		return checkPolicy(ctx, tx, orgID, func(hint, why string) apitypes.FieldError {
			i := index[hint]
			field := fmt.Sprintf("rules[%d].provider", i)
			if why == whyNoModel {
				field = fmt.Sprintf("rules[%d].model", i)
			}
			return apitypes.FieldError{Field: field, Rule: "routable",
				Message: fmt.Sprintf("provider %q %s", pol.Rules[i].Provider, why)}
		})
	})
	if err != nil {
		return apitypes.RoutingPolicy{}, err
	}
	return GetPolicy(ctx, db, orgID)
}

// providerID finds a provider of the organisation, locking its row.
func providerID(ctx context.Context, tx pgx.Tx, orgID, name string) (id, kind string, err error) {
	err = tx.QueryRow(ctx, `SELECT id, kind FROM provider_configs WHERE org_id = $1 AND name = $2 FOR UPDATE`,
		orgID, name).Scan(&id, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", &NotFoundError{What: "provider", Name: name}
	}
	if err != nil {
		return "", "", fmt.Errorf("reading provider %q: %w", name, err)
	}
	return id, kind, nil
}

// ListLimits returns every configured limit of the organisation's providers.
func ListLimits(ctx context.Context, db postgres.Querier, orgID string) ([]apitypes.ProviderLimit, error) {
	rows, err := db.Query(ctx, `SELECT pc.name, pl.model, pl.rpm, pl.tpm, pl.updated_at FROM provider_limits pl
		JOIN provider_configs pc ON pc.id = pl.provider_config_id WHERE pc.org_id = $1 ORDER BY pc.name, pl.model`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing limits: %w", err)
	}
	ls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[apitypes.ProviderLimit])
	if err != nil {
		return nil, fmt.Errorf("listing limits: %w", err)
	}
	return ls, nil
}

// PutLimit sets the RPM/TPM limits of a provider's model (0: no limit). Every router
// replica applies them to the shared buckets on the change's notification.
func PutLimit(ctx context.Context, db DB, orgID, name, model string, l apitypes.LimitSet) (apitypes.ProviderLimit, error) {
	if model == "" || len(model) > 200 {
		return apitypes.ProviderLimit{}, invalid("model", "required", "must name a model (at most 200 characters)")
	}
	if l.RPM < 0 || l.TPM < 0 {
		return apitypes.ProviderLimit{}, invalid("rpm", "min", "rpm and tpm must be 0 (no limit) or more")
	}
	out := apitypes.ProviderLimit{Provider: name, Model: model, RPM: l.RPM, TPM: l.TPM}
	err := inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		id, _, err := providerID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm) VALUES ($1, $2, $3, $4)
			ON CONFLICT (provider_config_id, model) DO UPDATE SET rpm = EXCLUDED.rpm, tpm = EXCLUDED.tpm, updated_at = now()
			RETURNING updated_at`, id, model, l.RPM, l.TPM).Scan(&out.UpdatedAt)
	})
	return out, err
}

// DeleteLimit removes a model's limits (the bucket becomes unlimited).
func DeleteLimit(ctx context.Context, db DB, orgID, name, model string) error {
	return inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		id, _, err := providerID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM provider_limits WHERE provider_config_id = $1 AND model = $2`, id, model)
		if err == nil && tag.RowsAffected() == 0 {
			err = &NotFoundError{What: "limit", Name: name + "/" + model}
		}
		return err
	})
}

// ListPrices returns the prices in effect for the organisation: its own, and the
// platform's defaults it has not overridden.
func ListPrices(ctx context.Context, db postgres.Querier, orgID string) ([]apitypes.Price, error) {
	rows, err := db.Query(ctx, `SELECT provider_kind, model, input_per_mtok::float8, output_per_mtok::float8,
			cached_per_mtok::float8, 'org', updated_at FROM org_prices WHERE org_id = $1
		UNION ALL
		SELECT p.provider_kind, p.model, p.input_per_mtok::float8, p.output_per_mtok::float8, p.cached_per_mtok::float8,
			'default', p.updated_at FROM prices p
		WHERE NOT EXISTS (SELECT 1 FROM org_prices o WHERE o.org_id = $1 AND o.provider_kind = p.provider_kind AND o.model = p.model)
		ORDER BY 1, 2`, orgID)
	if err != nil {
		return nil, fmt.Errorf("listing prices: %w", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[apitypes.Price])
	if err != nil {
		return nil, fmt.Errorf("listing prices: %w", err)
	}
	return ps, nil
}

// PutPrice sets the organisation's own price of a model, over any default.
func PutPrice(ctx context.Context, db DB, orgID, kind, model string, p apitypes.PriceSet) (apitypes.Price, error) {
	if !slices.Contains(Kinds, kind) {
		return apitypes.Price{}, invalid("providerKind", "oneof", "must be one of openai, openrouter, openai_compatible, anthropic, gemini")
	}
	if model == "" || len(model) > 200 {
		return apitypes.Price{}, invalid("model", "required", "must name a model (at most 200 characters)")
	}
	for field, v := range map[string]float64{"inputPerMTok": p.InputPerMTok, "outputPerMTok": p.OutputPerMTok, "cachedPerMTok": p.CachedPerMTok} {
		if v < 0 || v > 1e6 {
			return apitypes.Price{}, invalid(field, "range", "must be between 0 and 1000000 USD per million tokens")
		}
	}
	out := apitypes.Price{ProviderKind: kind, Model: model, InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok,
		CachedPerMTok: p.CachedPerMTok, Source: "org"}
	err := inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO org_prices (org_id, provider_kind, model, input_per_mtok, output_per_mtok, cached_per_mtok)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (org_id, provider_kind, model) DO UPDATE SET input_per_mtok = EXCLUDED.input_per_mtok,
				output_per_mtok = EXCLUDED.output_per_mtok, cached_per_mtok = EXCLUDED.cached_per_mtok, updated_at = now()
			RETURNING updated_at`, orgID, kind, model, p.InputPerMTok, p.OutputPerMTok, p.CachedPerMTok).Scan(&out.UpdatedAt)
	})
	return out, err
}

// DeletePrice removes the organisation's own price of a model; the default, if any,
// applies again.
func DeletePrice(ctx context.Context, db DB, orgID, kind, model string) error {
	return inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM org_prices WHERE org_id = $1 AND provider_kind = $2 AND model = $3`, orgID, kind, model)
		if err == nil && tag.RowsAffected() == 0 {
			err = &NotFoundError{What: "price", Name: kind + "/" + model}
		}
		return err
	})
}

// SetCredential seals key to the router's public key and stores it as the provider's
// credential, replacing any previous one (a rotation) and lifting a revocation. Only the
// last four characters are kept in the clear.
func SetCredential(ctx context.Context, db DB, s *Sealer, orgID, name, key, by string) (apitypes.CredentialInfo, error) {
	if len(key) < 8 {
		return apitypes.CredentialInfo{}, invalid("apiKey", "min", "must be at least 8 characters")
	}
	info := apitypes.CredentialInfo{Last4: Last4(key), SetBy: by, Scheme: SchemeAge}
	err := inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		id, _, err := providerID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		sealed, err := s.Seal(id, key)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO provider_credentials (provider_config_id, scheme, key_id, nonce, ciphertext, last4, set_by)
			VALUES ($1, 'age', $2, '', $3, $4, $5)
			ON CONFLICT (provider_config_id) DO UPDATE SET scheme = 'age', key_id = EXCLUDED.key_id, nonce = '',
				ciphertext = EXCLUDED.ciphertext, last4 = EXCLUDED.last4, set_by = EXCLUDED.set_by,
				created_at = now(), rotated_at = NULL, revoked_at = NULL
			RETURNING created_at`, id, s.Recipient(), sealed, info.Last4, by).Scan(&info.SetAt)
	})
	return info, err
}

// RevokeCredential revokes the provider's credential: its sealed key is wiped, and calls
// to the provider fail CREDENTIAL_REVOKED until a new key is set.
func RevokeCredential(ctx context.Context, db DB, orgID, name string) error {
	return inTx(ctx, db, orgID, func(tx pgx.Tx) error {
		id, _, err := providerID(ctx, tx, orgID, name)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE provider_credentials SET revoked_at = now(), nonce = '', ciphertext = ''
			WHERE provider_config_id = $1 AND revoked_at IS NULL`, id)
		if err == nil && tag.RowsAffected() == 0 {
			err = &NotFoundError{What: "credential", Name: name}
		}
		return err
	})
}

// ResealCredential replaces a credential's ciphertext with key sealed by s (the router's
// `credentials rotate`: a key-ring row, or one sealed to an older public key, moves to the
// current public key). It keeps the time the key was set and records the rotation.
func ResealCredential(ctx context.Context, tx pgx.Tx, s *Sealer, providerConfigID, key string) error {
	sealed, err := s.Seal(providerConfigID, key)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE provider_credentials SET scheme = 'age', key_id = $2, nonce = '', ciphertext = $3,
		last4 = $4, rotated_at = now() WHERE provider_config_id = $1`, providerConfigID, s.Recipient(), sealed, Last4(key))
	return err
}
