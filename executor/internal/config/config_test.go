package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/executor/internal/config"
)

// TestCapacityWait: "0" never parks (docs/executor.md), as a negative wait tells the runner.
func TestCapacityWait(t *testing.T) {
	t.Setenv("SWITCHYARD_DATABASE_URL", "postgres://x")
	t.Setenv("SWITCHYARD_REDIS_URL", "redis://x")
	t.Setenv("SWITCHYARD_SERVICE_KEY_FILE", "service.key")
	for v, want := range map[string]time.Duration{"": 10 * time.Second, "0": -1, "250ms": 250 * time.Millisecond, "-1s": 0, "soon": 0} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("SWITCHYARD_CAPACITY_WAIT", v)
			cfg, err := config.FromEnv("cpu")
			if want == 0 {
				require.ErrorContains(t, err, "SWITCHYARD_CAPACITY_WAIT")
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, cfg.CapacityWait)
		})
	}
}
