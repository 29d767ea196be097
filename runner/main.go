// Command runner drives rdmasweep experiments: it reads a plan, runs node
// serve and node read on the plan's hosts for every point, and appends one
// CSV row per run. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(runMain())
}

// runMain is the program as the shell sees it: SIGINT and SIGTERM cancel
// its context, dispatch does the work, and the error becomes the exit code.
// Tests run it in place of a built binary (see script_test.go).
func runMain() int {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(&interrupted{sig: sig.(syscall.Signal)})
	}()
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	// Whatever a command was doing when the signal came (connecting,
	// collecting facts), it failed because of the signal: say so, and
	// exit 128+signal.
	if intr := (*interrupted)(nil); err != nil && errors.As(context.Cause(ctx), &intr) {
		err = intr
	}
	return exitCode(err, os.Stderr)
}

// commands are the runner's commands, in the order usageText lists them. Each
// is one cmd_NAME.go: its options, their flags, and its flow.
var commands = []*command{
	execCommand, validateCommand, planCommand, checkCommand, summaryCommand,
	plotCommand, cleanCommand, csvUpgradeCommand, compareCommand,
}

// usageText is what runner help prints.
func usageText() string {
	var b strings.Builder
	b.WriteString("usage: runner <command> [flags] [args]\n\ncommands:\n")
	for _, c := range commands {
		b.WriteString(c.help + "\n")
	}
	b.WriteString(`  version         print the runner's version

Without PLAN, the built-in plans/loopback.yaml is used: both roles on this
machine, tcp transport. Run "runner help <command>" for a command's flags
and an example.`)
	return b.String()
}

// dispatch is the whole program; main only maps its error to an exit code.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageText())
		return errUsage
	}
	switch args[0] {
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "runner %s\n", version)
		return nil
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			fmt.Fprintln(stdout, usageText())
			return nil
		}
		return helpCommand(args[1:], stdout)
	}
	for _, c := range commands {
		name, sub, _ := strings.Cut(c.name, " ")
		if name != args[0] {
			continue
		}
		rest := args[1:]
		if sub != "" {
			if len(rest) == 0 || rest[0] != sub {
				return usageErrorf("%s takes one subcommand: %s %s", name, sub, c.args)
			}
			rest = rest[1:]
		}
		return runCommand(ctx, c, rest, stdout, stderr)
	}
	return usageErrorf("unknown command %q (run \"runner help\")", args[0])
}

// helpCommand is `runner help CMD`: CMD's help on stdout, as CMD -h
// prints it. A subcommand may be named with or without its verb
// ("csv" or "csv upgrade").
func helpCommand(args []string, stdout io.Writer) error {
	want := strings.Join(args, " ")
	for _, c := range commands {
		if name, _, _ := strings.Cut(c.name, " "); c.name == want || name == want {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			writeHelp(stdout, c, fs)
			return nil
		}
	}
	return usageErrorf("help: unknown command %q (run \"runner help\")", want)
}

// writeHelp writes c's help: its usage line, its flags with their
// defaults (not those kept only for old scripts), and an example.
func writeHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: runner %s %s\n", c.name, c.args)
	shown := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Usage, oldFlagUsage) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.SetOutput(w)
	shown.PrintDefaults()
	fmt.Fprintf(w, "\nexample:\n  %s\n", c.example)
}

// oldFlagUsage starts the usage of a flag kept only so old scripts still
// run: help does not list it.
const oldFlagUsage = "the old name of "

// runCommand parses c's flags from args, allowing them before and after
// the positional arguments, and runs c with the positionals. -h prints
// c's help on stdout and exits 0; a flag error prints it on stderr.
func runCommand(ctx context.Context, c *command, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // said below, on stdout or stderr
	flow := c.flags(fs)
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			writeHelp(stdout, c, fs)
			return nil
		} else if err != nil {
			writeHelp(stderr, c, fs)
			return errUsage // the flag package said why
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	fs.Usage = func() { writeHelp(stderr, c, fs) }
	return flow(ctx, globals{stdout: stdout, ui: &voice{w: stderr}, fs: fs}, pos)
}
