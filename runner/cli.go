package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"syscall"

	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/points/preflight"
)

// command is one of the runner's commands, shaped as restic's are: an
// options struct, the flags that fill it, and run(ctx, opts, g, args).
type command struct {
	name string // "exec"; a subcommand is "csv upgrade"
	args string // its arguments, as its usage line shows them: "[flags] [PLAN]"
	help string // its lines in the runner's usage, aligned with the others
	// example is one command line a user could type, shown by its help.
	example string
	// flags adds the command's options to fs and returns its flow, bound
	// to them; it runs once the flags are parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, g globals, args []string) error
}

// globals are what every command's flow gets beside its options.
type globals struct {
	stdout io.Writer // data: tables, CSV names
	ui     *voice    // stderr: messages for people
	fs     *flag.FlagSet
}

// usageError is a command's arguments that do not fit; fs.Usage has been
// printed.
func (g globals) usageError(format string, args ...any) error {
	g.fs.Usage()
	return usageErrorf(format, args...)
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
// voice: 0 ok, 1 failure, 2 bad usage or plan, a CSV exec cannot append
// to (foreign, or older and not yet upgraded), or a plan its hosts'
// devices cannot run; 3 a verdict failed (verdictFailed); 128+signal when
// interrupted.
func exitCode(err error, stderr io.Writer) int {
	ui := &voice{w: stderr}
	var (
		badUsage *usageError
		plErrs   plan.ErrorList
		intr     *interrupted
		failed   *someFailed
		vf       *verdictFailed
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		return 2
	case errors.As(err, &badUsage):
		ui.errorf("%s", badUsage.msg)
		return 2
	case errors.As(err, &plErrs):
		for _, e := range plErrs {
			fmt.Fprintln(stderr, e.Error())
		}
		ui.errorf("%s: %s", planFileOf(plErrs), words.Count(len(plErrs), "error"))
		return 2
	case errors.As(err, &intr):
		ui.errorf("%s", intr.Error())
		return 128 + int(intr.sig)
	case errors.Is(err, csvfile.ErrForeignHeader), errors.Is(err, csvfile.ErrOlderHeader):
		ui.errorf("%s", err)
		h := hint.Of(err)
		if h == "" {
			h = "the CSV was written by something else or an incompatible version; pass another --out"
		}
		ui.hintf("%s", h)
		return 2
	case errors.Is(err, preflight.ErrUnfit):
		ui.errorf("%s", err)
		ui.hintf("%s", hint.Of(err))
		return 2
	case errors.As(err, &failed):
		ui.errorf("%s", err)
		return 1
	case errors.As(err, &vf):
		ui.errorf("%s", err)
		return 3
	}
	ui.errorf("%s", err)
	if h := hint.Of(err); h != "" {
		ui.hintf("%s", h)
	}
	return 1
}

func planFileOf(errs plan.ErrorList) string {
	for _, e := range errs {
		if e.File != "" && !strings.HasPrefix(e.File, "--") {
			return e.File
		}
	}
	return "plan"
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

// info and warn are the voice as the packages' callbacks take it.
func (v *voice) info(msg string) { v.infof("%s", msg) }
func (v *voice) warn(msg string) { v.warnf("%s", msg) }

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

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// oneArg checks a command got exactly one positional argument.
func oneArg(g globals, pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", g.usageError("%s takes one %s (got %d arguments)", g.fs.Name(), what, len(pos))
	}
	return pos[0], nil
}
