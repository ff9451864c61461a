package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/provider-router/internal/config"
)

func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	base := map[string]string{"SWITCHYARD_DATABASE_URL": "postgres://x", "SWITCHYARD_REDIS_URL": "redis://x",
		"SWITCHYARD_SERVICE_KEY_FILE": "/k"}
	cases := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"loopback without TLS", map[string]string{"SWITCHYARD_ROUTER_ADDR": "127.0.0.1:8090"}, true},
		{"default address", nil, true},
		{"public without TLS", map[string]string{"SWITCHYARD_ROUTER_ADDR": "0.0.0.0:8090"}, false},
		{"half TLS", map[string]string{"SWITCHYARD_ROUTER_TLS_CERT": "c", "SWITCHYARD_ROUTER_TLS_KEY": "k"}, false},
		{"full mTLS on a public address", map[string]string{"SWITCHYARD_ROUTER_ADDR": ":8090",
			"SWITCHYARD_ROUTER_TLS_CERT": "c", "SWITCHYARD_ROUTER_TLS_KEY": "k", "SWITCHYARD_ROUTER_CLIENT_CA": "ca"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := config.FromEnv(true)
			if c.ok {
				require.NoError(t, err)
				require.Equal(t, []string{"executor"}, cfg.ClientNames)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestShareRequests(t *testing.T) {
	t.Setenv("SWITCHYARD_DATABASE_URL", "postgres://x")
	for v, want := range map[string]int{"": 64, "0": 0, "256": 256, "-1": -1, "many": -1} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("SWITCHYARD_ROUTER_SHARE_REQUESTS", v)
			cfg, err := config.FromEnv(false)
			if want < 0 {
				require.ErrorContains(t, err, "SWITCHYARD_ROUTER_SHARE_REQUESTS")
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, cfg.ShareRequests)
		})
	}
}

func TestQueueOrder(t *testing.T) {
	t.Setenv("SWITCHYARD_DATABASE_URL", "postgres://x")
	for v, want := range map[string]string{"": "progress", "progress": "progress", "fifo": "fifo", "remaining": "remaining", "FIFO": "", "lifo": ""} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("SWITCHYARD_ROUTER_QUEUE_ORDER", v)
			cfg, err := config.FromEnv(false)
			if want == "" {
				require.ErrorContains(t, err, "SWITCHYARD_ROUTER_QUEUE_ORDER")
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, cfg.QueueOrder)
		})
	}
}
