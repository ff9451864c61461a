package apitypes_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client/apitypes"
)

// TestHoldReasonPassesThrough checks that a hold reason is written as it was read — member
// order and unknown members kept — so the dispatcher can relay the stored JSON through the
// type unchanged, while one built in Go is written from its fields.
func TestHoldReasonPassesThrough(t *testing.T) {
	t.Parallel()
	in := `[{"path":"$.prompt","check":"pii","message":"m","detector":"email","extra":1},"legacy text"]`
	var rs []apitypes.HoldReason
	require.NoError(t, json.Unmarshal([]byte(in), &rs))
	require.Equal(t, "pii", rs[0].Check)
	require.Equal(t, "legacy text", rs[1].Message)
	out, err := json.Marshal(rs)
	require.NoError(t, err)
	require.Equal(t, in, string(out))

	out, err = json.Marshal(apitypes.HoldReason{Check: "risk", Message: "critical"})
	require.NoError(t, err)
	require.Equal(t, `{"check":"risk","message":"critical"}`, string(out))
}

func TestStatusTerminal(t *testing.T) {
	t.Parallel()
	require.True(t, apitypes.StatusRejected.Terminal())
	require.False(t, apitypes.StatusPendingReview.Terminal())
}
