package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// Quota keeps the organisation under its monthly token quota: it reserves call.Tokens
// before the call may wait for capacity, returns them if the call fails, and replaces the
// reservation with the tokens the provider reported after the answer.
type Quota struct {
	Next  Chatter
	Guard *budget.Guard
	Log   *slog.Logger
}

// Chat reserves the call's tokens and calls on.
func (l *Quota) Chat(ctx context.Context, call *Call) (*Result, error) {
	hold, err := l.Guard.ReserveTokens(ctx, call.OrgID, int64(call.Tokens))
	if err != nil {
		if qe, ok := errors.AsType[*budget.QuotaError](err); ok {
			return nil, apierr.New(http.StatusTooManyRequests, apierr.CodeQuotaExceeded,
				"The organisation's monthly token quota is exhausted.",
				"Wait for the next calendar month (UTC) or ask an admin to raise the quota.").
				With("quota", qe.Quota, "used", qe.Used, "tokens", qe.Tokens, "month", qe.Month)
		}
		return nil, dependencyError(apierr.CodeBudgetUnavailable, "The router could not check the token quota.", err)
	}
	res, err := l.Next.Chat(ctx, call)
	if err != nil {
		l.reconcile(context.WithoutCancel(ctx), call, hold, 0)
		return nil, err
	}
	res.Then(func(ctx context.Context) { l.reconcile(ctx, call, hold, res.In+res.Out) })
	return res, nil
}

// reconcile replaces the reservation with used tokens.
func (l *Quota) reconcile(ctx context.Context, call *Call, hold *budget.QuotaHold, used int64) {
	if err := hold.Reconcile(ctx, used); err != nil {
		l.Log.Warn("reconciling token quota", "org_id", call.OrgID, "error", err)
	}
}
