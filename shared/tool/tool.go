// Package tool is the registry of the tools an LLM may call during a tool_using run: what
// each tool is (name, description, JSON Schema of its arguments, how it is reached, its
// timeout, whether it has side effects or needs approval), which organisations may use it,
// the registry queries, and the YAML form of the catalogue in tools/.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/shared/postgres"
)

// Kinds of tool.
const (
	// KindHTTP is a tool reached by an HTTP request built from Method and URLTemplate.
	KindHTTP = "http"
	// KindBuiltin is implemented inside the executor (http_request).
	KindBuiltin = "builtin"
)

// HTTPRequest is the name of the built-in tool that fetches a URL from the organisation's
// allowlist (orgs.http_allowlist).
const HTTPRequest = "http_request"

// DefaultTimeout bounds a tool call whose tool sets no timeout.
const DefaultTimeout = 30 * time.Second

// Tool is one registry entry. Its YAML form is a file in tools/.
type Tool struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description" yaml:"description"`
	// Parameters is the JSON Schema of the arguments (an object schema).
	Parameters json.RawMessage `json:"parameters" yaml:"-"`
	Kind       string          `json:"kind" yaml:"kind"`
	// Method and URLTemplate say how an http tool is called. The template's {name}
	// placeholders are replaced by the (path-escaped) arguments of that name; the other
	// arguments are the JSON body (POST, PUT, PATCH) or the query string (GET, DELETE).
	Method      string `json:"method" yaml:"method"`
	URLTemplate string `json:"url_template" yaml:"url_template"`
	// TimeoutMS bounds one call; default 30000.
	TimeoutMS int `json:"timeout_ms" yaml:"timeout_ms"`
	// SideEffecting tools go through the tool-call ledger and get an Idempotency-Key.
	SideEffecting bool `json:"side_effecting" yaml:"side_effecting"`
	// HonoursIdempotencyKey declares that the tool answers a repeated Idempotency-Key with
	// the first call's answer instead of acting again. A side-effecting call whose outcome
	// is unknown (its worker died while it was in flight) is then sent again with the same
	// key and its answer used; without it the LLM is told the outcome is unknown. Only for
	// side-effecting tools; default false.
	HonoursIdempotencyKey bool `json:"honours_idempotency_key" yaml:"honours_idempotency_key"`
	// RequiresApproval pauses the run (pending_review) before the tool is called.
	RequiresApproval bool `json:"requires_approval" yaml:"requires_approval"`
	// AllowPrivate lets the tool reach its URL although it resolves to a private or
	// loopback address (an operator's internal service); default false.
	AllowPrivate bool `json:"allow_private" yaml:"allow_private"`
	// Grants lists the slugs of the organisations that may use the tool; "*" is every
	// organisation that exists when the catalogue is loaded. Only the YAML form uses it;
	// the registry keeps grants in tool_grants.
	Grants []string `json:"-" yaml:"grants"`
}

// Timeout is the tool's call timeout.
func (t Tool) Timeout() time.Duration {
	if t.TimeoutMS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(t.TimeoutMS) * time.Millisecond
}

// Defaults fills the fields a definition may leave out.
func (t *Tool) Defaults() {
	if t.Kind == "" {
		t.Kind = KindHTTP
	}
	if t.Method == "" {
		t.Method = "POST"
	}
	if t.TimeoutMS == 0 {
		t.TimeoutMS = int(DefaultTimeout / time.Millisecond)
	}
	if len(t.Parameters) == 0 {
		t.Parameters = json.RawMessage(`{"type":"object"}`)
	}
}

// Check reports what is wrong with a definition, naming the field.
func (t Tool) Check() error {
	switch {
	case t.Name == "":
		return errors.New("name is required")
	case t.Description == "":
		return fmt.Errorf("tool %q: description is required (the LLM chooses tools by it)", t.Name)
	case t.Kind != KindHTTP && t.Kind != KindBuiltin:
		return fmt.Errorf("tool %q: kind must be http or builtin", t.Name)
	case t.Kind == KindHTTP && t.URLTemplate == "":
		return fmt.Errorf("tool %q: url_template is required for an http tool", t.Name)
	case t.Kind == KindBuiltin && t.Name != HTTPRequest:
		return fmt.Errorf("tool %q: the only builtin tool is %s", t.Name, HTTPRequest)
	case t.HonoursIdempotencyKey && !t.SideEffecting:
		return fmt.Errorf("tool %q: honours_idempotency_key applies only to a side_effecting tool (only those are sent an Idempotency-Key)", t.Name)
	}
	switch t.Method {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
	default:
		return fmt.Errorf("tool %q: method must be GET, POST, PUT, PATCH or DELETE", t.Name)
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return fmt.Errorf("tool %q: parameters must be a JSON Schema object: %w", t.Name, err)
	}
	return nil
}

// ErrNotFound is returned when no tool has the given name.
var ErrNotFound = errors.New("tool not found")

// DB is what the registry queries need of a pool or a transaction.
type DB = postgres.Querier

const columns = `name, description, parameters, kind, method, url_template, timeout_ms, side_effecting,
	requires_approval, allow_private, honours_idempotency_key`

func scan(row pgx.Row) (Tool, error) {
	var t Tool
	err := row.Scan(&t.Name, &t.Description, &t.Parameters, &t.Kind, &t.Method, &t.URLTemplate, &t.TimeoutMS,
		&t.SideEffecting, &t.RequiresApproval, &t.AllowPrivate, &t.HonoursIdempotencyKey)
	return t, err
}

// Put creates or replaces a tool's definition. Grants are not touched; see Grant and Install.
func Put(ctx context.Context, db DB, t Tool) error {
	t.Defaults()
	if err := t.Check(); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO tools (name, description, parameters, kind, method, url_template,
			timeout_ms, side_effecting, requires_approval, allow_private, honours_idempotency_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description, parameters = EXCLUDED.parameters,
			kind = EXCLUDED.kind, method = EXCLUDED.method, url_template = EXCLUDED.url_template,
			timeout_ms = EXCLUDED.timeout_ms, side_effecting = EXCLUDED.side_effecting,
			requires_approval = EXCLUDED.requires_approval, allow_private = EXCLUDED.allow_private,
			honours_idempotency_key = EXCLUDED.honours_idempotency_key, updated_at = now()`,
		t.Name, t.Description, []byte(t.Parameters), t.Kind, t.Method, t.URLTemplate, t.TimeoutMS,
		t.SideEffecting, t.RequiresApproval, t.AllowPrivate, t.HonoursIdempotencyKey)
	if err != nil {
		return fmt.Errorf("saving tool %q: %w", t.Name, err)
	}
	return nil
}

// Grant lets an organisation use a tool.
func Grant(ctx context.Context, db DB, name, orgID string) error {
	if _, err := db.Exec(ctx, `INSERT INTO tool_grants (tool_name, org_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		name, orgID); err != nil {
		return fmt.Errorf("granting tool %q: %w", name, err)
	}
	return nil
}

// Revoke stops an organisation from using a tool.
func Revoke(ctx context.Context, db DB, name, orgID string) error {
	if _, err := db.Exec(ctx, `DELETE FROM tool_grants WHERE tool_name = $1 AND org_id = $2`, name, orgID); err != nil {
		return fmt.Errorf("revoking tool %q: %w", name, err)
	}
	return nil
}

// Install puts a catalogue definition and grants it to the organisations its Grants name
// ("*": every organisation). Run it inside a transaction with the rest of a bootstrap.
func Install(ctx context.Context, db DB, t Tool) error {
	if err := Put(ctx, db, t); err != nil {
		return err
	}
	if len(t.Grants) == 0 {
		return nil
	}
	all := false
	for _, g := range t.Grants {
		all = all || g == "*"
	}
	if _, err := db.Exec(ctx, `INSERT INTO tool_grants (tool_name, org_id)
		SELECT $1, id FROM orgs WHERE $2 OR slug = ANY($3) ON CONFLICT DO NOTHING`, t.Name, all, t.Grants); err != nil {
		return fmt.Errorf("granting tool %q: %w", t.Name, err)
	}
	return nil
}

// Get returns a tool by name.
func Get(ctx context.Context, db DB, name string) (Tool, error) {
	t, err := scan(db.QueryRow(ctx, `SELECT `+columns+` FROM tools WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Tool{}, ErrNotFound
	}
	if err != nil {
		return Tool{}, fmt.Errorf("reading tool %q: %w", name, err)
	}
	return t, nil
}

// Offered returns the tools of names that the organisation is granted, by name. A name
// that is not registered or not granted is left out: what the LLM may call is the
// intersection of what the skill lists and what the organisation enabled.
func Offered(ctx context.Context, db DB, orgID string, names []string) ([]Tool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM tools t
		WHERE t.name = ANY($2) AND EXISTS (SELECT 1 FROM tool_grants g WHERE g.tool_name = t.name AND g.org_id = $1)
		ORDER BY t.name`, orgID, names)
	if err != nil {
		return nil, fmt.Errorf("reading tools offered to organisation %s: %w", orgID, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tool, error) { return scan(r) })
}

// HTTPAllowlist returns the organisation's allowlist for the http_request tool.
func HTTPAllowlist(ctx context.Context, db DB, orgID string) ([]string, error) {
	var list []string
	if err := db.QueryRow(ctx, `SELECT http_allowlist FROM orgs WHERE id = $1`, orgID).Scan(&list); err != nil {
		return nil, fmt.Errorf("reading http allowlist of organisation %s: %w", orgID, err)
	}
	return list, nil
}
