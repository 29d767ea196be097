// Command node is the binary rdmasweep deploys to both hosts: `node serve`
// exposes a file's first bytes, `node read` reads them and measures. It
// prints JSON-lines events (package results) on stdout; messages for people
// go to stderr.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	hardExit = os.Exit
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, new(usageError)):
		os.Exit(2)
	case interrupted && errors.Is(err, context.Canceled):
		os.Exit(130)
	default:
		os.Exit(1)
	}
}
