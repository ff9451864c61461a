package pipeline

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/breaker"
	"github.com/switchyard-ai/switchyard/provider-router/internal/budget"
	"github.com/switchyard-ai/switchyard/provider-router/internal/handoff"
	"github.com/switchyard-ai/switchyard/provider-router/internal/limiter"
)

// links lists the chain's links, outermost first, by type name.
func links(c Chatter) []string {
	var names []string
	for c != nil {
		v := reflect.ValueOf(c)
		names = append(names, reflect.Indirect(v).Type().Name())
		if v.Kind() != reflect.Pointer {
			break
		}
		next, ok := v.Elem().FieldByName("Next").Interface().(Chatter)
		if !ok {
			break
		}
		c = next
	}
	return names
}

// The order is part of the router's behaviour (docs/router.md, "The call's chain"): what
// refuses without cost refuses before the limiter takes a slot, a repeated step is answered
// before anything is reserved, each retried attempt is admitted and passes the breaker again.
func TestChainOrder(t *testing.T) {
	t.Parallel()
	all := New(Parts{Handoff: &handoff.Store{}, Budget: &budget.Guard{}, Limiter: &limiter.Limiter{}, Breakers: &breaker.Set{}})
	require.Equal(t, []string{"Measure", "Step", "Route", "Residency", "Budget", "Estimate", "Quota", "Credential",
		"Ledger", "Retrier", "RateLimit", "Breaker", "MeasureAttempt", "Upstream"}, links(all))

	bare := New(Parts{})
	require.Equal(t, []string{"Measure", "Route", "Residency", "Budget", "Estimate", "Credential",
		"Ledger", "Retrier", "MeasureAttempt", "Upstream"}, links(bare), "parts not configured leave their link out")
}
