// Package governance decides, before anything reaches Redis, whether a job may run as
// dispatched, must be held for a reviewer, or is refused: data residency, risk level
// (critical or requires_approval → held; high → PII and keyword scan; limited → audit
// flag) and the organisation's monthly token quota. Every check it makes is reported so the
// dispatcher can record it as a governance_check span.
package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/pii"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Reason is why a job was held. It names the check, the detector and the JSON path —
// never the matched value.
type Reason struct {
	Check    string `json:"check"`
	Detector string `json:"detector,omitempty"`
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
}

// Check is one decision, recorded as a governance_check span.
type Check struct {
	Name    string         // residency, risk, pii_scan, quota
	Outcome string         // pass, hold, flag, refuse
	Attrs   map[string]any // non-secret detail
}

// Result is the verdict on a job that is not refused.
type Result struct {
	Hold         bool
	Reasons      []Reason
	AuditFlagged bool
	Checks       []Check
}

// Quota reads an organisation's token use and LLM cost this month.
type Quota interface {
	Used(ctx context.Context, orgID string) (int64, error)
	Top(ctx context.Context, orgID string) ([]store.SkillUsage, error)
	Cost(ctx context.Context, orgID string) (float64, error)
}

// Governor evaluates jobs. It keeps one PII scanner per organisation keyword list.
type Governor struct {
	Quota Quota

	mu       sync.Mutex
	scanners map[string]*pii.Scanner
}

// Evaluate decides on one job. A refusal is returned as an *apierr.Error
// (RESIDENCY_VIOLATION, QUOTA_EXCEEDED) together with the checks made so far.
func (g *Governor) Evaluate(ctx context.Context, org store.Org, sk skill.Skill, payload json.RawMessage) (Result, error) {
	var res Result
	if err := residency(org, sk); err != nil {
		res.Checks = append(res.Checks, Check{Name: "residency", Outcome: "refuse", Attrs: map[string]any{
			"org_jurisdiction": org.Jurisdiction, "data_residency": sk.DataResidency}})
		return res, err
	}
	res.Checks = append(res.Checks, Check{Name: "residency", Outcome: "pass", Attrs: map[string]any{
		"org_jurisdiction": org.Jurisdiction, "data_residency": sk.DataResidency}})

	if org.MonthlyTokenQuota != nil {
		used, err := g.Quota.Used(ctx, org.ID)
		if err != nil {
			return res, err
		}
		limit := *org.MonthlyTokenQuota
		if used >= limit {
			top, err := g.Quota.Top(ctx, org.ID)
			if err != nil {
				return res, err
			}
			res.Checks = append(res.Checks, Check{Name: "quota", Outcome: "refuse", Attrs: map[string]any{"used": used, "limit": limit}})
			return res, apierr.New(http.StatusTooManyRequests, apierr.CodeQuotaExceeded,
				"The organisation has used its monthly token quota.",
				"Wait for the next calendar month (UTC), or ask an admin to raise monthlyTokenQuota.",
				"context.top_skills shows which skills used the most tokens.").
				With("used", used, "limit", limit, "top_skills", top, "resets_at", nextMonth(time.Now()))
		}
		res.Checks = append(res.Checks, Check{Name: "quota", Outcome: "pass", Attrs: map[string]any{"used": used, "limit": limit}})
	}
	if org.MonthlyCostBudgetUSD != nil {
		spent, err := g.Quota.Cost(ctx, org.ID)
		if err != nil {
			return res, err
		}
		budget := *org.MonthlyCostBudgetUSD
		if spent >= budget {
			res.Checks = append(res.Checks, Check{Name: "cost_budget", Outcome: "refuse", Attrs: map[string]any{"spent_usd": spent, "budget_usd": budget}})
			return res, apierr.New(http.StatusTooManyRequests, apierr.CodeCostBudgetExceeded,
				"The organisation has spent its monthly cost budget.",
				"Wait for the next calendar month (UTC), or ask the platform operator to raise monthlyCostBudgetUsd.").
				With("spent_usd", spent, "budget_usd", budget, "resets_at", nextMonth(time.Now()))
		}
		res.Checks = append(res.Checks, Check{Name: "cost_budget", Outcome: "pass", Attrs: map[string]any{"spent_usd": spent, "budget_usd": budget}})
	}

	switch {
	case sk.RiskLevel == "critical" || sk.RequiresApproval:
		res.Hold = true
		msg := "the skill's risk level is critical: every job needs a reviewer's approval"
		detector := "critical_risk"
		if sk.RiskLevel != "critical" {
			msg, detector = "the skill requires approval for every job", "requires_approval"
		}
		res.Reasons = append(res.Reasons, Reason{Check: "risk", Detector: detector, Message: msg})
		res.Checks = append(res.Checks, Check{Name: "risk", Outcome: "hold", Attrs: map[string]any{
			"risk_level": sk.RiskLevel, "requires_approval": sk.RequiresApproval}})
	case sk.RiskLevel == "high":
		findings, err := g.scan(org.PIIKeywords, payload)
		if err != nil {
			return res, err
		}
		outcome := "pass"
		if len(findings) > 0 {
			outcome, res.Hold = "hold", true
		}
		detectors := []string{}
		for _, f := range findings {
			check := "pii"
			if f.Detector == pii.DetectorKeyword {
				check = "keyword"
			}
			res.Reasons = append(res.Reasons, Reason{Check: check, Detector: f.Detector, Path: f.Path,
				Message: fmt.Sprintf("%s detected at %s", strings.ReplaceAll(f.Detector, "_", " "), f.Path)})
			if !slices.Contains(detectors, f.Detector) {
				detectors = append(detectors, f.Detector)
			}
		}
		res.Checks = append(res.Checks, Check{Name: "pii_scan", Outcome: outcome, Attrs: map[string]any{
			"risk_level": sk.RiskLevel, "findings": len(findings), "detectors": detectors}})
	case sk.RiskLevel == "limited":
		res.AuditFlagged = true
		res.Checks = append(res.Checks, Check{Name: "risk", Outcome: "flag", Attrs: map[string]any{"risk_level": sk.RiskLevel}})
	default:
		res.Checks = append(res.Checks, Check{Name: "risk", Outcome: "pass", Attrs: map[string]any{"risk_level": sk.RiskLevel}})
	}
	return res, nil
}

// Allowed reports whether an organisation in jurisdiction may run a skill with residency.
func Allowed(jurisdiction, residency string) bool {
	switch residency {
	case "eu_only":
		return jurisdiction == "eu"
	case "us_only":
		return jurisdiction == "us"
	}
	return true
}

func residency(org store.Org, sk skill.Skill) error {
	if Allowed(org.Jurisdiction, sk.DataResidency) {
		return nil
	}
	return apierr.New(http.StatusForbidden, apierr.CodeResidencyViolation,
		fmt.Sprintf("Skill %q may only process data under %s; your organisation's jurisdiction is %q.",
			sk.JobType, sk.DataResidency, org.Jurisdiction),
		"Use a skill whose data_residency allows your jurisdiction, or ask an admin to change the binding.",
		"The payload was not queued or stored.").
		With("job_type", sk.JobType, "data_residency", sk.DataResidency, "org_jurisdiction", org.Jurisdiction)
}

func (g *Governor) scan(keywords []string, payload json.RawMessage) ([]pii.Finding, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding payload for scanning: %w", err)
	}
	return g.scanner(keywords).Scan(v), nil
}

// Mask returns the payload with everything the scanner detects masked, for reviewers.
func (g *Governor) Mask(keywords []string, payload json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return g.scanner(keywords).Mask(v), nil
}

func (g *Governor) scanner(keywords []string) *pii.Scanner {
	k := strings.Join(keywords, "\x00")
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.scanners[k]; ok {
		return s
	}
	if g.scanners == nil || len(g.scanners) > 1000 {
		g.scanners = map[string]*pii.Scanner{}
	}
	s := pii.NewScanner(keywords)
	g.scanners[k] = s
	return s
}

func nextMonth(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}
