// Command node is the binary rdmasweep deploys to both hosts: `node serve`
// exposes a file's first bytes, `node read` reads them and measures. It
// prints JSON-lines events (package results) on stdout; messages for people
// go to stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"rdmasweep/node/session"
)

// version is set with -ldflags "-X main.version=…".
var version = "dev"

// command runs one subcommand. It sets env.out as soon as it knows the
// output format, so run can print its error in that format.
type command func(ctx context.Context, env *env, args []string) error

// namedCommand is a subcommand and its name.
type namedCommand struct {
	name string
	run  command
}

// table holds node's subcommands, in the order usage lists them, as
// runner lists its own; cli.go fills it.
var table []namedCommand

func main() {
	hardExit, reraise = os.Exit, reraiseSignal
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	code := exitStatus(ctx, err)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	attached := os.Getenv(attachedEnv) != ""
	os.Unsetenv(attachedEnv)
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, attached: attached}
	// Before any command: node checks it is the very file the runner
	// deployed (deploypath in runner/hosts/remote says how).
	if err := selfCheck(); err != nil {
		e.out = session.NewPrinter(stdout, stderr, "json")
		e.out.Error(err)
		return err
	}
	return runEnv(ctx, e, args)
}

// runEnv runs the command args in e, and prints its error.
func runEnv(ctx context.Context, e *env, args []string) error {
	e.out = session.NewPrinter(e.stdout, e.stderr, "json")
	err := dispatch(ctx, e, args)
	var help helpText
	if errors.As(err, &help) { // asked for: data on stdout, not an error
		_, err := io.WriteString(e.stdout, string(help))
		return err
	}
	if err != nil && !errors.As(err, new(exitCode)) { // node run's command said why
		e.out.Error(err)
	}
	return err
}

// exitStatus is how node exits after run returned err under ctx: 0, 2
// for a usage error, 130 when a signal ended ctx and so the command, node
// run's command's own status, else 1. node attach --loop gives a command
// it runs in its own process the same status.
func exitStatus(ctx context.Context, err error) int {
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, new(usageError)):
		return 2
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return 130
	}
	return 1
}

func dispatch(ctx context.Context, e *env, args []string) error {
	usage := fmt.Sprintf("usage: node %s [flags]", strings.Join(commandNames(), "|"))
	if len(args) == 0 {
		return usagef("%s", usage)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return helpText(usage + "\nRun \"node COMMAND -h\" for a command's flags and their defaults.\n")
	}
	if e.attached && args[0] == "attach" {
		return usagef("attach: the runner's command is attach again")
	}
	for _, c := range table {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	return usagef("unknown command %q (want one of %s)", args[0], strings.Join(commandNames(), ", "))
}

func commandNames() []string {
	var names []string
	for _, c := range table {
		names = append(names, c.name)
	}
	return names
}
