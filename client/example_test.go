package client_test

// These examples need a running dispatcher (`make run`), so they have no Output comment:
// `go test` compiles them but does not run them. client_test.go runs the same calls
// against an in-process dispatcher.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/switchyard-ai/switchyard/client"
)

func Example() {
	ctx := context.Background()
	c, err := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Dispatch(ctx, client.DispatchRequest{
		JobType:        "demo_llm",
		Payload:        map[string]any{"prompt": "Say hello in French."},
		IdempotencyKey: "greeting-42", // safe to retry, and retried on 429/503
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("job", res.JobID, res.Status)

	// Follow the job until it ends, then read its output.
	for e, err := range c.Watch(ctx, res.JobID, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Seq, e.Type)
	}
	run, err := c.Get(ctx, res.JobID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Status, string(run.Output))
}

func ExampleClient_Dispatch_errors() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	_, err := c.Dispatch(context.Background(), client.DispatchRequest{JobType: "demo_llm", Payload: map[string]any{}})
	var ae *client.APIError
	switch {
	case errors.Is(err, client.ErrRateLimited):
		errors.As(err, &ae)
		fmt.Println("slow down; retry in", ae.RetryAfter)
	case errors.Is(err, client.ErrValidationFailed):
		errors.As(err, &ae)
		for _, f := range ae.FieldErrors() {
			fmt.Printf("%s: %s\n", f.Field, f.Message)
		}
	case errors.As(err, &ae):
		fmt.Println(ae.Code, ae.Message, ae.Troubleshooting)
	case err != nil:
		fmt.Println("transport:", err)
	}
}

func ExampleClient_DispatchBatch() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	res, err := c.DispatchBatch(context.Background(), []client.DispatchRequest{
		{JobType: "demo_llm", Payload: map[string]any{"prompt": "one"}},
		{JobType: "demo_llm", Payload: map[string]any{"prompt": "two"}, Priority: client.PriorityLow},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range res.Items {
		if it.Error != nil {
			fmt.Println(it.Index, "refused:", it.Error.Code)
			continue
		}
		fmt.Println(it.Index, it.Result.JobID, it.Result.Status)
	}
}

func ExampleClient_ListAll() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	since := time.Now().Add(-24 * time.Hour)
	for run, err := range c.ListAll(context.Background(), client.ListOptions{Status: client.StatusHeldForReview, Since: since}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(run.JobID, run.JobType, run.HoldReasons)
	}
}

func ExampleClient_Approve() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_APPROVER_KEY"))
	reviews, err := c.Reviews(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range reviews {
		if _, err := c.Approve(context.Background(), r.JobID, "checked by the on-call reviewer"); err != nil {
			log.Print(err)
		}
	}
}

func ExampleSkillsService_Put() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	s, created, err := c.Skills.Put(context.Background(), client.SkillSpec{
		JobType: "summarise", Enabled: true, ExecutionType: "llm_only",
		SystemPrompt: "Summarise in one sentence.", RiskLevel: "limited",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.JobType, "version", s.Version, "created", created)
}

func ExampleKeysService_Create() {
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	k, err := c.Keys.Create(context.Background(), "crm-service", "dispatch", "viewer")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("store this now:", k.Secret)
}

func ExampleClient_WatchChain() {
	ctx := context.Background()
	c, _ := client.New("http://127.0.0.1:8080", os.Getenv("SWITCHYARD_API_KEY"))
	// Dispatching a chain skill's job type starts the chain; the job is its parent run.
	res, err := c.Dispatch(ctx, client.DispatchRequest{JobType: "demo_research",
		Payload: map[string]any{"topic": "tidal power"}})
	if err != nil {
		log.Fatal(err)
	}
	for e, err := range c.WatchChain(ctx, res.ChainID, nil) {
		if err != nil {
			log.Fatal(err)
		}
		if d, ok := e.ChainData(); ok && e.Type == "chain:step_ended" {
			fmt.Println(d.StepID, d.Status, d.CostUSD)
		}
	}
	ch, err := c.Chain(ctx, res.ChainID)
	if err != nil {
		log.Fatal(err)
	}
	if ch.Status != client.ChainCompleted {
		// Run the failed, cancelled and skipped steps again, reusing what completed.
		again, err := c.RerunChain(ctx, ch.ChainID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("rerun", again.ChainID, "reused", again.Reused)
	}
}
