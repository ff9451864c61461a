// Package bootstrap prepares a development organisation: the org, an admin API key written
// to a file (and, when asked, a platform operator key in another), a provider pointing at sim-llm, prices for the simulated models and the skill
// catalogue. Every step is idempotent, so `make run` may call it on every start.
package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/chain"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/workflow"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/tool"
)

// Options say what to prepare.
type Options struct {
	OrgSlug      string // default "dev"
	OrgName      string // default "Development"
	Jurisdiction string // default "eu"
	KeyFile      string // where the admin key is written; required
	// OperatorKeyFile is where a platform operator key is written when the file holds none
	// that still authenticates; empty: no operator key.
	OperatorKeyFile string
	SkillsDir       string // the catalogue; empty skips it
	WorkflowsDir    string // workflows/*.yaml, registered as chain skills; empty skips it
	ToolsDir        string // the tool catalogue (tools/*.yaml); empty skips it
	SimURL          string // sim-llm's OpenAI base URL, e.g. http://127.0.0.1:8099/v1; empty skips the provider
}

// Result says what was prepared.
type Result struct {
	OrgID      string
	Key        string
	KeyCreated bool
	// OperatorKeyCreated is true when a new operator key was written to OperatorKeyFile.
	OperatorKeyCreated bool
	operatorKey        string
	Skills             map[string]skill.Action
	Tools              []string
}

// Run prepares the development organisation.
func Run(ctx context.Context, pool *pgxpool.Pool, opts Options, log *slog.Logger) (Result, error) {
	if opts.KeyFile == "" {
		return Result{}, errors.New("bootstrap: --key-file is required")
	}
	opts.OrgSlug = firstNonEmpty(opts.OrgSlug, "dev")
	opts.OrgName = firstNonEmpty(opts.OrgName, "Development")
	opts.Jurisdiction = firstNonEmpty(opts.Jurisdiction, "eu")

	var res Result
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if res.OrgID, err = EnsureOrg(ctx, tx, opts.OrgSlug, opts.OrgName, opts.Jurisdiction); err != nil {
			return err
		}
		if res.Key, res.KeyCreated, err = ensureKey(ctx, tx, res.OrgID, opts.KeyFile); err != nil {
			return err
		}
		if opts.OperatorKeyFile != "" {
			if res.operatorKey, res.OperatorKeyCreated, err = ensureOperatorKey(ctx, tx, opts.OperatorKeyFile); err != nil {
				return err
			}
		}
		if opts.SimURL != "" {
			if err := EnsureSimProvider(ctx, tx, res.OrgID, opts.SimURL); err != nil {
				return err
			}
		}
		if opts.ToolsDir != "" {
			tools, err := tool.LoadDir(opts.ToolsDir)
			if err != nil {
				return err
			}
			for _, t := range tools {
				if err := tool.Install(ctx, tx, t); err != nil {
					return err
				}
				res.Tools = append(res.Tools, t.Name)
			}
		}
		if opts.SkillsDir != "" {
			if res.Skills, err = LoadSkills(ctx, tx, res.OrgID, opts.SkillsDir, "bootstrap"); err != nil {
				return err
			}
		}
		if opts.WorkflowsDir != "" {
			wf, err := LoadWorkflows(ctx, tx, res.OrgID, opts.WorkflowsDir, "bootstrap")
			if err != nil {
				return err
			}
			if res.Skills == nil {
				res.Skills = map[string]skill.Action{}
			}
			maps.Copy(res.Skills, wf)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if res.KeyCreated {
		if err := writeKey(opts.KeyFile, res.Key); err != nil {
			return Result{}, err
		}
	}
	if res.OperatorKeyCreated {
		if err := writeKey(opts.OperatorKeyFile, res.operatorKey); err != nil {
			return Result{}, err
		}
	}
	log.Info("bootstrap done", "org_id", res.OrgID, "org", opts.OrgSlug, "key_created", res.KeyCreated,
		"skills", len(res.Skills), "tools", len(res.Tools))
	return res, nil
}

// EnsureOrg returns the id of the organisation with slug, creating it when missing.
func EnsureOrg(ctx context.Context, db auth.DB, slug, name, jurisdiction string) (string, error) {
	var id string
	err := db.QueryRow(ctx, `INSERT INTO orgs (slug, name, jurisdiction) VALUES ($1, $2, $3)
		ON CONFLICT (slug) DO UPDATE SET slug = EXCLUDED.slug RETURNING id`, slug, name, jurisdiction).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("creating organisation %q: %w", slug, err)
	}
	return id, nil
}

// ensureKey keeps the key in keyFile when it still authenticates for the org, and creates a
// new admin key otherwise.
func ensureKey(ctx context.Context, db auth.DB, orgID, keyFile string) (string, bool, error) {
	if b, err := os.ReadFile(keyFile); err == nil {
		key := strings.TrimSpace(string(b))
		p, err := auth.Authenticate(ctx, db, key)
		if err == nil && p.OrgID == orgID {
			return key, false, nil
		}
		if err != nil && !errors.Is(err, auth.ErrUnknownKey) {
			return "", false, err
		}
	}
	key, _, err := auth.Create(ctx, db, orgID, "dev-admin", []auth.Role{auth.RoleAdmin}, "bootstrap")
	if err != nil {
		return "", false, err
	}
	return key, true, nil
}

// ensureOperatorKey keeps the operator key in keyFile when it still authenticates as an
// operator, and creates a new one otherwise.
func ensureOperatorKey(ctx context.Context, db auth.DB, keyFile string) (string, bool, error) {
	if b, err := os.ReadFile(keyFile); err == nil {
		key := strings.TrimSpace(string(b))
		p, err := auth.Authenticate(ctx, db, key)
		if err == nil && p.Operator() {
			return key, false, nil
		}
		if err != nil && !errors.Is(err, auth.ErrUnknownKey) {
			return "", false, err
		}
	}
	key, _, err := auth.CreateOperator(ctx, db, "operator", "bootstrap")
	if err != nil {
		return "", false, err
	}
	return key, true, nil
}

func writeKey(path, key string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing key file %s: %w", path, err)
	}
	return nil
}

// simModels maps every routing role to a simulated model.
var simModels = map[string]string{
	"default": "sim-fast", "fast": "sim-fast", "creative": "sim-fast",
	"reasoning": "sim-large", "code": "sim-large", "long_context": "sim-large",
}

// EnsureSimProvider points the organisation's routing at sim-llm. The simulator runs on
// this machine, so it is marked as an EU endpoint and eu_only skills can run in development.
func EnsureSimProvider(ctx context.Context, db auth.DB, orgID, baseURL string) error {
	models, _ := json.Marshal(simModels)
	var providerID string
	err := db.QueryRow(ctx, `INSERT INTO provider_configs (org_id, name, kind, base_url, jurisdiction, models)
		VALUES ($1, 'sim-llm', 'openai_compatible', $2, 'eu', $3)
		ON CONFLICT (org_id, name) DO UPDATE SET base_url = EXCLUDED.base_url, models = EXCLUDED.models,
			updated_at = now()
		RETURNING id`, orgID, baseURL, models).Scan(&providerID)
	if err != nil {
		return fmt.Errorf("configuring sim-llm provider: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO routing_policies (org_id, hint, provider_config_id)
		SELECT $1, h, $2 FROM unnest(ARRAY['default','fast','reasoning','code','long_context','creative']) AS h
		ON CONFLICT (org_id, hint) DO NOTHING`, orgID, providerID); err != nil {
		return fmt.Errorf("configuring routing policy: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO prices (provider_kind, model, input_per_mtok, output_per_mtok, cached_per_mtok)
		VALUES ('openai_compatible', 'sim-fast', 0.15, 0.60, 0.075), ('openai_compatible', 'sim-large', 2.50, 10.00, 1.25)
		ON CONFLICT (provider_kind, model) DO NOTHING`); err != nil {
		return fmt.Errorf("configuring prices: %w", err)
	}
	return nil
}

// LoadSkills puts every binding of the catalogue in dir into the organisation's registry.
func LoadSkills(ctx context.Context, db skill.DB, orgID, dir, by string) (map[string]skill.Action, error) {
	skills, err := skill.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	// A chain's steps must name skills of the catalogue: checked before anything is put,
	// as the API checks a chain skill when it is saved.
	known := map[string]bool{}
	for _, s := range skills {
		known[s.JobType] = s.ExecutionType != "chain"
	}
	for _, s := range skills {
		if s.ExecutionType != "chain" {
			continue
		}
		if _, errs := chain.Parse(s.Chain, func(jobType string) bool { return known[jobType] }); errs != nil {
			msgs := make([]string, len(errs))
			for i, e := range errs {
				msgs[i] = e.Field + ": " + e.Message
			}
			return nil, fmt.Errorf("skill %s: %s", s.JobType, strings.Join(msgs, "; "))
		}
	}
	actions := make(map[string]skill.Action, len(skills))
	for _, s := range skills {
		_, action, err := skill.Put(ctx, db, orgID, s, by)
		if err != nil {
			return nil, err
		}
		actions[s.JobType] = action
	}
	return actions, nil
}

// LoadWorkflows registers every workflow file of dir as a chain skill of the organisation,
// each checked first as the API checks one: its steps call the organisation's skills, its
// runs-on names queues. One file with a problem registers none.
func LoadWorkflows(ctx context.Context, db skill.DB, orgID, dir, by string) (map[string]skill.Action, error) {
	files, err := skill.LoadWorkflowDir(dir)
	if err != nil {
		return nil, err
	}
	have, err := skill.List(ctx, db, orgID)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, s := range have {
		known[s.JobType] = s.Callable()
	}
	labels, err := store.QueueLabels(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, s := range files {
		_, problems := workflow.Parse([]byte(s.Workflow), workflow.Options{RunnerLabels: labels,
			KnownSkill: func(jt string) bool { return known[jt] }})
		if len(problems) > 0 {
			msgs := make([]string, len(problems))
			for i, p := range problems {
				msgs[i] = fmt.Sprintf("%d:%d: %s (%s)", p.Line, p.Column, p.Message, p.Rule)
			}
			return nil, fmt.Errorf("workflow %s/%s.yaml: %s", dir, s.JobType, strings.Join(msgs, "; "))
		}
	}
	actions := make(map[string]skill.Action, len(files))
	for _, s := range files {
		_, action, err := skill.Put(ctx, db, orgID, s, by)
		if err != nil {
			return nil, err
		}
		actions[s.JobType] = action
	}
	return actions, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
