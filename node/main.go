// Command node is the binary rdmasweep deploys to both hosts: `node serve`
// exposes a file's first bytes, `node read` reads them and measures. It
// prints JSON-lines events (package results) on stdout; messages for people
// go to stderr.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	hardExit, reraise = os.Exit, reraiseSignal
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	code := exitStatus(ctx, err)
	stop()
	os.Exit(code)
}
