package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchyard-ai/switchyard/provider-router/internal/sim"
)

// BenchmarkChat is one router call end to end (mTLS, locks, routing, limits with a
// configured bucket, estimates, ledger) in front of an in-process sim-llm answering at once.
func BenchmarkChat(b *testing.B) {
	bb := setup(b, options{models: []sim.ModelConfig{{Name: "sim-fast", Output: "constant:16"}}})
	_, err := bb.pool.Exec(context.Background(), `INSERT INTO provider_limits (provider_config_id, model, rpm, tpm) VALUES ($1, 'sim-fast', 100000000, 1000000000)`, bb.providerID)
	if err != nil {
		b.Fatal(err)
	}
	h := bb.headers()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			code, out, _ := chatVia(bb.t, bb.client, bb.url, h, simpleBody)
			if code != http.StatusOK {
				b.Errorf("%d %v", code, out)
			}
		}
	})
}
