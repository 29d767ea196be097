package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"rdmasweep/plan"
	"rdmasweep/results"
)

const usage = `usage: runner <command> [flags] [args]

commands:
  exec [PLAN]     run the plan's points and append rows to its CSV
  validate [PLAN] check a plan; exit 0 when valid, 2 with every error
  plan [PLAN]     print the expanded points and their keys
  check [PLAN]    connect and deploy, check both hosts and the data path;
                  exit 1 with a hint per problem
  summary CSV     print the summary table of an existing CSV
  plot CSV -o F   draw bandwidth and p50/p99 latency against block size
                  (F ends in .png or .svg)
  clean [PLAN]    remove the created data file and sidecar, the deployed
                  node and leftover state (--dry-run: only list them)
  csv upgrade CSV give a CSV written by an older rdmasweep today's columns
  compare OLD NEW compare two CSVs point by point, or one CSV
                  --between name=a,name=b; exit 3 on a --fail-on change
  version         print the runner's version

Without PLAN, the built-in plans/loopback.yaml is used: both roles on this
machine, tcp transport. Run "runner <command> -h" for a command's flags.`

// run is the whole program; main only maps its error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return errUsage
	}
	ui := &voice{w: stderr}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "exec":
		return runExec(ctx, rest, stdout, ui)
	case "validate":
		return runValidate(ctx, rest, stdout, ui)
	case "plan":
		return runPlan(ctx, rest, stdout, ui)
	case "summary":
		return runSummary(ctx, rest, stdout, ui)
	case "check":
		return runCheck(ctx, rest, stdout, ui)
	case "plot":
		return runPlot(ctx, rest, stdout, ui)
	case "clean":
		return runClean(ctx, rest, stdout, ui)
	case "csv":
		return runCSV(ctx, rest, stdout, ui)
	case "compare":
		return runCompare(ctx, rest, stdout, ui)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "runner %s\n", version)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usageErrorf("unknown command %q (run \"runner help\")", cmd)
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// errUsage is a usage error already explained to the user.
var errUsage = errors.New("usage")

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// interrupted is the cause of ctx's cancellation on SIGINT or SIGTERM.
type interrupted struct{ sig syscall.Signal }

func (e *interrupted) Error() string {
	if e.sig == syscall.SIGTERM {
		return "interrupted by SIGTERM"
	}
	return "interrupted by SIGINT"
}

// someFailed is returned by exec when the sweep ran but some points failed.
type someFailed struct{ failed, total int }

func (e *someFailed) Error() string {
	return fmt.Sprintf("%d of %d runs failed (see the error column and the logs)", e.failed, e.total)
}

// verdictFailed is returned when everything ran but a judgement failed:
// an expectation of the plan, or compare's --fail-on. It exits 3.
type verdictFailed struct{ msg string }

func (e *verdictFailed) Error() string { return e.msg }

// exitCode says what err means to the shell and prints it in the runner's
// voice: 0 ok, 1 failure, 2 bad usage or plan or a CSV exec cannot append
// to (foreign, or older and not yet upgraded), 3 a verdict failed
// (verdictFailed), 128+signal when interrupted.
func exitCode(err error, stderr io.Writer) int {
	ui := &voice{w: stderr}
	var (
		usage  *usageError
		plErrs plan.ErrorList
		intr   *interrupted
		failed *someFailed
		vf     *verdictFailed
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	case errors.As(err, &usage):
		ui.errorf("%s", usage.msg)
		return 2
	case errors.As(err, &plErrs):
		for _, e := range plErrs {
			fmt.Fprintln(stderr, e.Error())
		}
		ui.errorf("%s: %s", planFileOf(plErrs), plural(len(plErrs), "error"))
		return 2
	case errors.As(err, &intr):
		ui.errorf("%s", intr.Error())
		return 128 + int(intr.sig)
	case errors.Is(err, results.ErrForeignHeader), errors.Is(err, results.ErrOlderHeader):
		ui.errorf("%s", err)
		hint := "the CSV was written by something else or an incompatible version; pass another --out"
		if h := (hinted)(nil); errors.As(err, &h) {
			hint = h.Hint()
		}
		ui.hintf("%s", hint)
		return 2
	case errors.As(err, &failed):
		ui.errorf("%s", err)
		return 1
	case errors.As(err, &vf):
		ui.errorf("%s", err)
		return 3
	}
	ui.errorf("%s", err)
	var h hinted
	if errors.As(err, &h) {
		ui.hintf("%s", h.Hint())
	}
	return 1
}

// hinted is an error that knows what the user can do about it.
type hinted interface{ Hint() string }

type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }
func (e *hintError) Hint() string  { return e.hint }

func withHint(err error, hint string) error { return &hintError{err: err, hint: hint} }

func planFileOf(errs plan.ErrorList) string {
	for _, e := range errs {
		if e.File != "" && !strings.HasPrefix(e.File, "--") {
			return e.File
		}
	}
	return "plan"
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// voice writes the runner's messages to stderr: "runner: error: …",
// "runner: warning: …", "runner: hint: …", lowercase, no trailing period.
type voice struct {
	w    io.Writer
	seen map[string]bool
}

func (v *voice) errorf(format string, args ...any) { v.say("error: ", format, args...) }
func (v *voice) warnf(format string, args ...any)  { v.say("warning: ", format, args...) }
func (v *voice) hintf(format string, args ...any)  { v.say("hint: ", format, args...) }
func (v *voice) infof(format string, args ...any)  { v.say("", format, args...) }

// warnOnce prints a warning the first time it is seen in this run, and
// reports whether it did.
func (v *voice) warnOnce(format string, args ...any) bool {
	msg := fmt.Sprintf(format, args...)
	if v.seen == nil {
		v.seen = map[string]bool{}
	}
	if v.seen[msg] {
		return false
	}
	v.seen[msg] = true
	v.warnf("%s", msg)
	return true
}

func (v *voice) say(kind, format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), ". \n")
	fmt.Fprintf(v.w, "runner: %s%s\n", kind, msg)
}

// parseFlags parses fs allowing flags before and after positional
// arguments, and returns the positionals.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// newFlagSet makes a FlagSet that prints its errors and usage to stderr
// and returns them (ContinueOnError), so the command's exit code is 2.
func newFlagSet(name, argsUsage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: runner %s %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// oneArg checks a command got exactly one positional argument.
func oneArg(fs *flag.FlagSet, pos []string, what string) (string, error) {
	if len(pos) != 1 {
		fs.Usage()
		return "", usageErrorf("%s takes one %s (got %d arguments)", fs.Name(), what, len(pos))
	}
	return pos[0], nil
}

// defaultNodeBinary is the node file beside the running runner.
func defaultNodeBinary() string {
	exe, err := os.Executable()
	if err != nil {
		return "node"
	}
	return filepath.Join(filepath.Dir(exe), "node")
}
