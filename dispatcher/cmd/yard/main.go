// Command yard is the Switchyard command line: dispatch and follow jobs, review held ones,
// sync the skill catalogue into the registry and manage API keys, all through the public
// Go client (client/, its own module). docs/cli.md lists every command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
