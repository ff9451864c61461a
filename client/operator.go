package client

import (
	"context"
	"net/http"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// OrgCreate is a new organisation: slug, name and jurisdiction are required; unset limits
// take the platform's defaults.
type OrgCreate = apitypes.OrgCreate

// OperatorOrgPatch is what an operator changes on an organisation; nil fields stay as they
// are, ClearTokenQuota and ClearCostBudget remove the quota and the budget.
type OperatorOrgPatch = apitypes.OperatorOrgPatch

// OrgDetail is an organisation with what operators did to it.
type OrgDetail = apitypes.OrgDetail

// OrgAuditEntry is one thing an operator did to an organisation.
type OrgAuditEntry = apitypes.OrgAuditEntry

// OrgSuspended is the answer to a suspension: the organisation, and how much of its work
// was cancelled or asked to stop.
type OrgSuspended = apitypes.OrgSuspended

// OrgsService is the platform operator's: it creates, changes, suspends and resumes
// organisations and issues their admin keys. It needs an operator key (role operator);
// every org argument is an organisation's id or slug.
type OrgsService struct{ c *Client }

// CreateKey makes another operator key (role operator), its secret shown this once.
func (o *OrgsService) CreateKey(ctx context.Context, name string) (CreatedKey, error) {
	var out CreatedKey
	err := o.c.do(ctx, request{method: http.MethodPost, path: "/api/v1/operator/keys",
		body: apitypes.OperatorKeyCreate{Name: name}}, &out)
	return out, err
}

// Keys returns the operator keys, revoked ones included, without secrets.
func (o *OrgsService) Keys(ctx context.Context) ([]Key, error) {
	var out list[Key]
	err := o.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/operator/keys", retryable: true}, &out)
	return out.items, err
}

// RevokeKey revokes an operator key by id (ErrKeyNotFound for an organisation's key).
func (o *OrgsService) RevokeKey(ctx context.Context, id string) error {
	return o.c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/operator/keys/" + pathEscape(id), retryable: true}, nil)
}

func orgPath(org string) string { return "/api/v1/operator/orgs/" + pathEscape(org) }

// Create creates an organisation (ErrOrgExists when the slug is taken).
func (o *OrgsService) Create(ctx context.Context, req OrgCreate) (Org, error) {
	var out Org
	err := o.c.do(ctx, request{method: http.MethodPost, path: "/api/v1/operator/orgs", body: req}, &out)
	return out, err
}

// List returns every organisation, by slug.
func (o *OrgsService) List(ctx context.Context) ([]Org, error) {
	var out list[Org]
	err := o.c.do(ctx, request{method: http.MethodGet, path: "/api/v1/operator/orgs", retryable: true}, &out)
	return out.items, err
}

// Get returns an organisation with its audit (ErrOrgNotFound when there is none).
func (o *OrgsService) Get(ctx context.Context, org string) (OrgDetail, error) {
	var out OrgDetail
	err := o.c.do(ctx, request{method: http.MethodGet, path: orgPath(org), retryable: true}, &out)
	return out, err
}

// Update sets an organisation's jurisdiction, limits, token quota or cost budget.
func (o *OrgsService) Update(ctx context.Context, org string, p OperatorOrgPatch) (Org, error) {
	var out Org
	err := o.c.do(ctx, request{method: http.MethodPatch, path: orgPath(org), body: p, retryable: true}, &out)
	return out, err
}

// Suspend suspends an organisation: its dispatches answer ORG_SUSPENDED from now on, its
// queued, held and paused work is cancelled and its running work gets a cancellation request. Repeating
// it repeats that sweep.
func (o *OrgsService) Suspend(ctx context.Context, org, reason string) (OrgSuspended, error) {
	var out OrgSuspended
	err := o.c.do(ctx, request{method: http.MethodPost, path: orgPath(org) + "/suspend",
		body: apitypes.OrgSuspend{Reason: reason}, retryable: true}, &out)
	return out, err
}

// Resume lets a suspended organisation dispatch again.
func (o *OrgsService) Resume(ctx context.Context, org string) (Org, error) {
	var out Org
	err := o.c.do(ctx, request{method: http.MethodPost, path: orgPath(org) + "/resume", retryable: true}, &out)
	return out, err
}

// CreateAdminKey issues an admin key of the organisation (name "" means "admin"); its
// secret is answered this once.
func (o *OrgsService) CreateAdminKey(ctx context.Context, org, name string) (CreatedKey, error) {
	var out CreatedKey
	err := o.c.do(ctx, request{method: http.MethodPost, path: orgPath(org) + "/admin-keys",
		body: apitypes.AdminKeyCreate{Name: name}}, &out)
	return out, err
}
