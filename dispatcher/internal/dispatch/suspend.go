package dispatch

import (
	"context"
	"errors"
	"net/http"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/runstore"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/run"
)

// activeOrg returns the organisation a dispatch is for, or 403 ORG_SUSPENDED while a
// platform operator has suspended it. The registry cache serves it: a suspension reaches
// every replica with the orgs row's NOTIFY (and this one at once, ForgetOrg).
func (s *Service) activeOrg(ctx context.Context, orgID string) (store.Org, error) {
	org, err := s.Registry.Org(ctx, orgID)
	if err != nil {
		return store.Org{}, dbError(err)
	}
	if org.SuspendedAt != nil {
		return store.Org{}, OrgSuspended(org)
	}
	return org, nil
}

// OrgSuspended is the 403 of every dispatch of a suspended organisation.
func OrgSuspended(org store.Org) *apierr.Error {
	return apierr.New(http.StatusForbidden, apierr.CodeOrgSuspended,
		"The organisation is suspended: it may not dispatch work.",
		"Ask the platform operator to resume it; runs already recorded can still be read.").
		With("org_id", org.ID, "suspended_at", org.SuspendedAt, "reason", org.SuspendReason)
}

// Stopped counts what StopOrg did.
type Stopped struct {
	// Cancelled: runs that were queued, held or paused, and chains (with their steps).
	Cancelled int
	// CancelRequested: running runs asked to stop at their next step.
	CancelRequested int
}

// StopOrg stops a suspended organisation's unfinished work through the cancel path of
// POST /api/v1/dispatch/{id}/cancel, as op: queued runs leave their queue, held and paused
// ones are cancelled, running ones get a cancellation request (the executor's in-flight
// router and tool requests end at once; it checks the request before every step), and a
// chain is cancelled with its steps. It may be repeated: what ended meanwhile is skipped.
func (s *Service) StopOrg(ctx context.Context, op auth.Principal, orgID string, c Canceller) (Stopped, error) {
	var out Stopped
	ids, err := runstore.New(s.DB).UnfinishedRuns(ctx, orgID)
	if err != nil {
		return out, dbError(err)
	}
	p := auth.Principal{OrgID: orgID, KeyID: op.KeyID, KeyName: op.KeyName, Roles: op.Roles}
	for _, id := range ids {
		res, err := s.Cancel(ctx, p, id, c)
		var ae *apierr.Error
		if errors.As(err, &ae) && (ae.Code == apierr.CodeJobAlreadyFinished || ae.Code == apierr.CodeChainAlreadyFinished ||
			ae.Code == apierr.CodeJobNotFound) {
			continue // ended meanwhile, e.g. a step of a chain cancelled before it
		}
		if err != nil {
			return out, err
		}
		switch {
		case res.CancelRequested:
			out.CancelRequested++
		case res.Status == run.Cancelled:
			out.Cancelled++
		}
	}
	return out, nil
}
