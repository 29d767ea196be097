// Command runner drives rdmasweep experiments: it reads a plan, runs node
// serve and node read on the plan's hosts for every point, and appends one
// CSV row per run. See README.md.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(runMain())
}

// runMain is the program as the shell sees it: SIGINT and SIGTERM cancel
// its context, run does the work, and the error becomes the exit code.
// Tests run it in place of a built binary (see script_test.go).
func runMain() int {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(&interrupted{sig: sig.(syscall.Signal)})
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	// Whatever a command was doing when the signal came (connecting,
	// collecting facts), it failed because of the signal: say so, and
	// exit 128+signal.
	if intr := (*interrupted)(nil); err != nil && errors.As(context.Cause(ctx), &intr) {
		err = intr
	}
	return exitCode(err, os.Stderr)
}
