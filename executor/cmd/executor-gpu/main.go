// Command executor-gpu consumes Switchyard's GPU-class named queues and runs their jobs.
//
//	executor-gpu serve     consume queues (default)
//	executor-gpu migrate   apply database migrations and exit
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-ai/switchyard/executor/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Main(ctx, "executor-gpu", "gpu", os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "executor-gpu:", err)
		os.Exit(1)
	}
}
