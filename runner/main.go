// Command runner drives rdmasweep experiments: it reads a plan, runs node
// serve and node read on the plan's hosts for every point, and appends one
// CSV row per run. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(&interrupted{sig: sig.(syscall.Signal)})
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}
