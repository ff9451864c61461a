package harness_test

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// TestKillAndRestartOnTheSameAddress starts sim-llm and the router (mutual TLS), kills the
// simulator with SIGKILL and starts it again on the same address, stops the router with
// SIGTERM, and finds each state from the outside.
func TestKillAndRestartOnTheSameAddress(t *testing.T) {
	ctx := context.Background()
	bin := t.TempDir()
	if err := harness.Build(ctx, bin, harness.Sim, harness.Router); err != nil {
		t.Fatal(err)
	}
	h := harness.Test(t, harness.Options{Bin: bin, RouterTLS: true, ReadyTimeout: 30 * time.Second})
	sim, err := h.Start(ctx, harness.Sim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Start(ctx, harness.Router); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Start(ctx, harness.Sim); err == nil {
		t.Fatal("a second sim-llm on the same address was started")
	}

	if err := h.Kill(harness.Sim); err != nil {
		t.Fatal(err)
	}
	if !sim.Exited() {
		t.Fatal("sim-llm still runs after SIGKILL")
	}
	if resp, err := http.Get(h.SimURL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("a killed sim-llm still answers")
	}
	again, err := h.Start(ctx, harness.Sim)
	if err != nil {
		t.Fatal(err)
	}
	if again.Addr != sim.Addr || again.PID() == sim.PID() {
		t.Fatalf("restart: %s pid %d, was %s pid %d", again.Addr, again.PID(), sim.Addr, sim.PID())
	}

	// The router serves TLS with the dev CA's certificate and the simulator is back.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: h.TLSConfig()}}
	if err := harness.WaitReady(ctx, client, h.RouterURL+"/healthz", h.Proc(harness.Router), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Stop(harness.Router, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := h.Healthy(ctx); err == nil {
		t.Fatal("Healthy with the router stopped")
	}
	if _, err := os.Stat(h.LogPath(harness.Router)); err != nil {
		t.Fatal(err)
	}
}
