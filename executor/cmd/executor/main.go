// Command executor consumes Switchyard's CPU-class named queues and runs their jobs.
//
//	executor serve     consume queues (default)
//	executor migrate   apply database migrations and exit
package main

import (
	"context"

	"github.com/switchyard-ai/switchyard/executor/internal/app"
	"github.com/switchyard-ai/switchyard/shared/service"
)

func main() {
	service.Main("executor", app.Usage("executor", "cpu"), func(ctx context.Context, args []string) error {
		return app.Main(ctx, "executor", "cpu", args)
	})
}
