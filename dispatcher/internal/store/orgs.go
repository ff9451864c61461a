package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Org is an organisation's settings as the dispatcher uses them. The callback secret is
// never part of it: it is read only by the callback sender.
type Org struct {
	ID                string   `json:"id"`
	Slug              string   `json:"slug"`
	Name              string   `json:"name"`
	Jurisdiction      string   `json:"jurisdiction"`
	OrgRPM            int      `json:"orgRpm"`
	UserRPM           int      `json:"userRpm"`
	MonthlyTokenQuota *int64   `json:"monthlyTokenQuota"`
	PIIKeywords       []string `json:"piiKeywords"`
	CallbackAllowlist []string `json:"callbackAllowlist"`
	HTTPAllowlist     []string `json:"httpAllowlist"`
	// MaxBacklog caps the organisation's runs queued or running; 0: no cap.
	MaxBacklog int       `json:"maxBacklog"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

const orgColumns = `id, slug, name, jurisdiction, org_rpm, user_rpm, monthly_token_quota, pii_keywords,
	callback_allowlist, http_allowlist, max_backlog, updated_at`

// GetOrg returns an organisation.
func GetOrg(ctx context.Context, db DB, id string) (Org, error) {
	rows, err := db.Query(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = $1`, id)
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
type OrgPatch struct {
	Name              *string   `json:"name" validate:"omitempty,min=1,max=200"`
	Jurisdiction      *string   `json:"jurisdiction" validate:"omitempty,oneof=eu us other"`
	OrgRPM            *int      `json:"orgRpm" validate:"omitempty,min=0,max=10000000"`
	UserRPM           *int      `json:"userRpm" validate:"omitempty,min=0,max=10000000"`
	MonthlyTokenQuota *int64    `json:"monthlyTokenQuota" validate:"omitempty,min=0"`
	ClearTokenQuota   bool      `json:"clearTokenQuota"`
	PIIKeywords       *[]string `json:"piiKeywords" validate:"omitempty,max=1000,dive,min=1,max=100"`
	CallbackAllowlist *[]string `json:"callbackAllowlist" validate:"omitempty,max=100,dive,min=1,max=255"`
	HTTPAllowlist     *[]string `json:"httpAllowlist" validate:"omitempty,max=100,dive,min=1,max=255"`
	MaxBacklog        *int      `json:"maxBacklog" validate:"omitempty,min=0,max=100000000"`
}

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
type SkillUsage struct {
	JobType string  `json:"jobType"`
	Model   string  `json:"model,omitempty"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUsd"`
	Calls   int64   `json:"calls"`
}

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

// Usage returns a month's tokens and cost by skill and model.
func Usage(ctx context.Context, db DB, orgID string, month time.Time) ([]SkillUsage, error) {
	rows, err := db.Query(ctx, `SELECT job_type, model, sum(tokens_in + tokens_out)::bigint, sum(cost_usd)::float8, count(*)
		FROM usage_ledger WHERE org_id = $1 AND created_at >= $2 AND created_at < $2::date + interval '1 month'
		GROUP BY job_type, model ORDER BY 3 DESC`, orgID, monthStart(month))
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[SkillUsage])
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
