package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// ErrOrgExists is returned when an organisation with the slug exists already.
var ErrOrgExists = errors.New("organisation exists")

// OrgAuditEntry is one thing an operator did to an organisation.
type OrgAuditEntry = apitypes.OrgAuditEntry

// CreateOrg creates an organisation with the operator's settings and records it in
// org_audit, in one transaction.
func CreateOrg(ctx context.Context, db TxDB, c apitypes.OrgCreate, by string) (Org, error) {
	var o Org
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var quota any = c.MonthlyTokenQuota
		var budget any = c.MonthlyCostBudgetUSD
		rows, err := tx.Query(ctx, `INSERT INTO orgs (slug, name, jurisdiction, org_rpm, user_rpm, monthly_token_quota,
				monthly_cost_budget_usd, max_backlog, created_by)
			VALUES ($1, $2, $3, COALESCE($4, 6000), COALESCE($5, 600), $6, $7, COALESCE($8, 10000), $9)
			RETURNING `+orgColumns,
			c.Slug, c.Name, c.Jurisdiction, c.OrgRPM, c.UserRPM, quota, budget, c.MaxBacklog, by)
		if err != nil {
			return err
		}
		o, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Org])
		if err != nil {
			return err
		}
		return Audit(ctx, tx, o.ID, "create", by, "", c)
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return Org{}, ErrOrgExists
	}
	if err != nil {
		return Org{}, fmt.Errorf("creating organisation: %w", err)
	}
	return o, nil
}

// TxDB is what needs a transaction of its own: a pool (or a transaction, for a savepoint).
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ListOrgs returns every organisation, by slug.
func ListOrgs(ctx context.Context, db DB) ([]Org, error) {
	rows, err := db.Query(ctx, `SELECT `+orgColumns+` FROM orgs ORDER BY slug`)
	if err != nil {
		return nil, fmt.Errorf("listing organisations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Org])
}

// FindOrg returns the organisation with an id or a slug.
func FindOrg(ctx context.Context, db DB, idOrSlug string) (Org, error) {
	if uuid.Validate(idOrSlug) == nil {
		return orgWhere(ctx, db, "id", idOrSlug)
	}
	return orgWhere(ctx, db, "slug", idOrSlug)
}

// OperatorUpdateOrg applies an operator's patch and records it, in one transaction.
func OperatorUpdateOrg(ctx context.Context, db TxDB, id string, p apitypes.OperatorOrgPatch, by string) (Org, error) {
	var o Org
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var quota any = p.MonthlyTokenQuota
		var budget any = p.MonthlyCostBudgetUSD
		rows, err := tx.Query(ctx, `UPDATE orgs SET
				name = COALESCE($2, name),
				jurisdiction = COALESCE($3, jurisdiction),
				org_rpm = COALESCE($4, org_rpm),
				user_rpm = COALESCE($5, user_rpm),
				monthly_token_quota = CASE WHEN $6 THEN NULL ELSE COALESCE($7, monthly_token_quota) END,
				monthly_cost_budget_usd = CASE WHEN $8 THEN NULL ELSE COALESCE($9, monthly_cost_budget_usd) END,
				max_backlog = COALESCE($10, max_backlog),
				updated_at = now()
			WHERE id = $1 RETURNING `+orgColumns,
			id, p.Name, p.Jurisdiction, p.OrgRPM, p.UserRPM, p.ClearTokenQuota, quota, p.ClearCostBudget, budget, p.MaxBacklog)
		if err != nil {
			return err
		}
		o, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Org])
		if err != nil {
			return err
		}
		return Audit(ctx, tx, id, "update", by, "", p)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Org{}, ErrNotFound
	}
	if err != nil {
		return Org{}, fmt.Errorf("updating organisation: %w", err)
	}
	return o, nil
}

// SetSuspended suspends (reason non-empty) or resumes (suspend false) an organisation and
// records who did it, in one transaction. Suspending a suspended organisation keeps its
// first suspension's time and author (the sweep of its work may be repeated); resuming an
// active one changes nothing but is recorded.
func SetSuspended(ctx context.Context, db TxDB, id string, suspend bool, reason, by string) (Org, error) {
	var o Org
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		q := `UPDATE orgs SET suspended_at = COALESCE(suspended_at, now()),
				suspended_by = CASE WHEN suspended_at IS NULL THEN $2 ELSE suspended_by END,
				suspend_reason = CASE WHEN suspended_at IS NULL THEN $3 ELSE suspend_reason END,
				updated_at = now()
			WHERE id = $1 RETURNING ` + orgColumns
		action := "suspend"
		args := []any{id, by, reason}
		if !suspend {
			q = `UPDATE orgs SET suspended_at = NULL, suspended_by = '', suspend_reason = '', updated_at = now()
				WHERE id = $1 RETURNING ` + orgColumns
			action, args = "resume", []any{id}
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		o, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Org])
		if err != nil {
			return err
		}
		return Audit(ctx, tx, id, action, by, reason, nil)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Org{}, ErrNotFound
	}
	if err != nil {
		return Org{}, fmt.Errorf("suspending organisation: %w", err)
	}
	return o, nil
}

// Audit records what an operator did to an organisation; detail (settings, counts — never
// a secret) is stored as JSON.
func Audit(ctx context.Context, db DB, orgID, action, by, reason string, detail any) error {
	b := []byte("{}")
	if detail != nil {
		var err error
		if b, err = json.Marshal(detail); err != nil {
			return err
		}
	}
	if _, err := db.Exec(ctx, `INSERT INTO org_audit (org_id, action, actor, reason, detail) VALUES ($1, $2, $3, $4, $5)`,
		orgID, action, by, reason, b); err != nil {
		return fmt.Errorf("recording %s of organisation: %w", action, err)
	}
	return nil
}

// OrgAudit returns what operators did to an organisation, oldest first (at most limit
// entries, the newest).
func OrgAudit(ctx context.Context, db DB, orgID string, limit int) ([]OrgAuditEntry, error) {
	rows, err := db.Query(ctx, `SELECT action, actor, reason, detail, at FROM (
			SELECT id, action, actor, reason, detail, at FROM org_audit WHERE org_id = $1 ORDER BY id DESC LIMIT $2
		) a ORDER BY id`, orgID, limit)
	if err != nil {
		return nil, fmt.Errorf("reading organisation audit: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[OrgAuditEntry])
}

// MonthlyCostSQL reads an organisation's ($1) cost of a month ($2, its first day).
const MonthlyCostSQL = `SELECT COALESCE(sum(cost_usd), 0)::float8 FROM org_monthly_usage WHERE org_id = $1 AND month = $2`

// MonthlyCost returns the LLM cost (USD) an organisation has run up this calendar month
// (UTC): one row of org_monthly_usage, whose cost_usd the router's ledger mover adds each
// ledger row's cost to as it writes the row (the sum of the month's usage_ledger rows).
func MonthlyCost(ctx context.Context, db DB, orgID string, now time.Time) (float64, error) {
	var cost float64
	err := db.QueryRow(ctx, MonthlyCostSQL, orgID, monthStart(now)).Scan(&cost)
	if err != nil {
		return 0, fmt.Errorf("reading monthly cost: %w", err)
	}
	return cost, nil
}
