// Command executor consumes Switchyard's CPU-class named queues and runs their jobs.
//
//	executor serve     consume queues (default)
//	executor migrate   apply database migrations and exit
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
	if err := app.Main(ctx, "executor", "cpu", os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		os.Exit(1)
	}
}
