// Command executor-gpu consumes Switchyard's GPU-class named queues and runs their jobs.
//
//	executor-gpu serve     consume queues (default)
//	executor-gpu migrate   apply database migrations and exit
package main

import (
	"context"

	"github.com/switchyard-ai/switchyard/executor/internal/app"
	"github.com/switchyard-ai/switchyard/shared/service"
)

func main() {
	service.Main("executor-gpu", app.Usage("executor-gpu", "gpu"), func(ctx context.Context, args []string) error {
		return app.Main(ctx, "executor-gpu", "gpu", args)
	})
}
