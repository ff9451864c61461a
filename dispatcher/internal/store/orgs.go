package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// Org is an organisation's settings as the dispatcher uses them and the admin API shows
// them (its fields in the order of orgColumns). The callback secret is never part of it: it
// is read only by the callback sender.
type Org = apitypes.Org

const orgColumns = `id, slug, name, jurisdiction, org_rpm, user_rpm, monthly_token_quota, pii_keywords,
	callback_allowlist, http_allowlist, max_backlog, updated_at, suspended_at, suspended_by, suspend_reason,
	monthly_cost_budget_usd::float8, created_by, created_at`

// GetOrg returns an organisation.
func GetOrg(ctx context.Context, db DB, id string) (Org, error) { return orgWhere(ctx, db, "id", id) }

// orgWhere returns the organisation whose column col (id or slug) is v.
func orgWhere(ctx context.Context, db DB, col, v string) (Org, error) {
	rows, err := db.Query(ctx, `SELECT `+orgColumns+` FROM orgs WHERE `+col+` = $1`, v)
	if err != nil {
		return Org{}, fmt.Errorf("reading organisation: %w", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Org])
	if errors.Is(err, pgx.ErrNoRows) {
		return Org{}, ErrNotFound
	}
	if err != nil {
		return Org{}, fmt.Errorf("reading organisation: %w", err)
	}
	return o, nil
}

// OrgPatch holds the settings an admin may change; nil fields stay as they are.
type OrgPatch = apitypes.OrgPatch

// UpdateOrg applies a patch and returns the organisation after it.
func UpdateOrg(ctx context.Context, db DB, id string, p OrgPatch) (Org, error) {
	var quota any = p.MonthlyTokenQuota
	rows, err := db.Query(ctx, `UPDATE orgs SET
			name = COALESCE($2, name),
			jurisdiction = COALESCE($3, jurisdiction),
			org_rpm = COALESCE($4, org_rpm),
			user_rpm = COALESCE($5, user_rpm),
			monthly_token_quota = CASE WHEN $6 THEN NULL ELSE COALESCE($7, monthly_token_quota) END,
			pii_keywords = COALESCE($8, pii_keywords),
			callback_allowlist = COALESCE($9, callback_allowlist),
			http_allowlist = COALESCE($10, http_allowlist),
			max_backlog = COALESCE($11, max_backlog),
			updated_at = now()
		WHERE id = $1 RETURNING `+orgColumns,
		id, p.Name, p.Jurisdiction, p.OrgRPM, p.UserRPM, p.ClearTokenQuota, quota, p.PIIKeywords,
		p.CallbackAllowlist, p.HTTPAllowlist, p.MaxBacklog)
	if err != nil {
		return Org{}, fmt.Errorf("updating organisation: %w", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Org])
	if errors.Is(err, pgx.ErrNoRows) {
		return Org{}, ErrNotFound
	}
	return o, err
}

// MonthlyTokens returns the tokens an organisation has used this calendar month (UTC).
func MonthlyTokens(ctx context.Context, db DB, orgID string, now time.Time) (int64, error) {
	var used int64
	err := db.QueryRow(ctx, `SELECT COALESCE(sum(tokens), 0) FROM org_monthly_usage WHERE org_id = $1 AND month = $2`,
		orgID, monthStart(now)).Scan(&used)
	if err != nil {
		return 0, fmt.Errorf("reading monthly usage: %w", err)
	}
	return used, nil
}

// SkillUsage is what one skill consumed in a month.
type SkillUsage = apitypes.SkillUsage

// TopSkills returns the skills that consumed the most tokens this month, largest first.
func TopSkills(ctx context.Context, db DB, orgID string, now time.Time, limit int) ([]SkillUsage, error) {
	rows, err := db.Query(ctx, `SELECT job_type, '' AS model, sum(tokens_in + tokens_out)::bigint, sum(cost_usd)::float8, count(*)
		FROM usage_ledger WHERE org_id = $1 AND created_at >= $2 AND created_at < $2::date + interval '1 month'
		GROUP BY job_type ORDER BY 3 DESC LIMIT $3`, orgID, monthStart(now), limit)
	if err != nil {
		return nil, fmt.Errorf("reading usage by skill: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[SkillUsage])
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
