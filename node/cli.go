package main

// What every subcommand shares: dispatch, the event printer, the control
// channel on stdin, the deadline, and size flags.

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// version is set with -ldflags "-X main.version=…".
var version = "dev"

// command runs one subcommand. It sets env.out as soon as it knows the
// output format, so run can print its error in that format.
type command func(ctx context.Context, env *env, args []string) error

// commands are node's subcommands, in the order usage lists them, as
// runner lists its own. A function, not a variable: attach runs commands
// through dispatch, which reads this list.
func commands() []namedCommand {
	return []namedCommand{
		{"serve", runServe}, {"read", runRead}, {"prepare", runPrepare}, {"attach", runAttach},
		{"run", runRun}, {"nvmet", runNVMet}, {"nvmeof-read", runNVMeOFRead}, {"nvmeof-clean", runNVMeOFClean}, {"devices", runDevices}, {"host", runHost}, {"version", runVersion},
	}
}

// namedCommand is a subcommand and its name.
type namedCommand struct {
	name string
	run  command
}

// env is a subcommand's view of the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	out            *printer
	// attached is a command node attach runs, whose command line came
	// from the runner: serve refuses to run without a secret there.
	attached bool
}

// attachedEnv marks a child of node attach --loop as attached.
const attachedEnv = "RDMASWEEP_NODE_ATTACHED"

type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	attached := os.Getenv(attachedEnv) != ""
	os.Unsetenv(attachedEnv)
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, attached: attached}
	// Before any command: node checks it is the very file the runner
	// deployed (deploypath in runner/hosts/remote says how).
	if err := selfCheck(); err != nil {
		e.out = newPrinter(stdout, stderr, "json")
		e.out.error(err)
		return err
	}
	return runEnv(ctx, e, args)
}

// runEnv runs the command args in e, and prints its error.
func runEnv(ctx context.Context, e *env, args []string) error {
	e.out = newPrinter(e.stdout, e.stderr, "json")
	err := dispatch(ctx, e, args)
	var help helpText
	if errors.As(err, &help) { // asked for: data on stdout, not an error
		_, err := io.WriteString(e.stdout, string(help))
		return err
	}
	if err != nil && !errors.As(err, new(exitCode)) { // node run's command said why
		e.out.error(err)
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

// helpText is what -h asked for: run prints it once, on stdout, and
// node exits 0.
type helpText string

func (h helpText) Error() string { return string(h) }

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
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	return usagef("unknown command %q (want one of %s)", args[0], strings.Join(commandNames(), ", "))
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// parseFlags parses args, which hold only flags (node takes no positional
// arguments after the subcommand).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpText(fmt.Sprintf("usage: node %s [flags]\n%s", fs.Name(), flagUsage(fs)))
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// flagUsage lists fs's flags as -h shows them: name, the kind of value,
// what it does and, unless it is the zero value, its default.
func flagUsage(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if kind != "" {
			fmt.Fprintf(&b, " %s", kind)
		}
		fmt.Fprintf(&b, "\n    \t%s", usage)
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	return b.String()
}

// printer writes events. In json format every event is a line on stdout;
// warnings and errors are also told to stderr for a person. In text format
// stdout carries only the classic lines, and warnings and errors go to
// stderr alone.
type printer struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	text           bool
}

func newPrinter(stdout, stderr io.Writer, format string) *printer {
	return &printer{stdout: stdout, stderr: stderr, text: format == "text"}
}

func (p *printer) event(ev any) {
	if p.text {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(results.Error{Type: results.TypeError, Message: "encode event: " + err.Error()})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdout.Write(append(b, '\n'))
}

// line prints a classic text line (text format only).
func (p *printer) line(format string, a ...any) {
	if !p.text {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stdout, format+"\n", a...)
}

func (p *printer) warn(msg string) {
	p.event(results.Warning{Type: results.TypeWarning, Message: msg})
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stderr, "node: warning: %s\n", msg)
}

func (p *printer) error(err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	p.event(results.Error{Type: results.TypeError, Message: msg, Code: errorCode(err)})
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stderr, "node: error: %s\n", err)
}

// errStdinClosed and the deadline are why a node stops on its own; they
// become the cause of its context, and so the message of its error event.
var errStdinClosed = errors.New("stdin closed: stopping")

// lifetime is what both subcommands set up before slow work: --deadline
// and --control-stdin.
type lifetime struct {
	controlStdin bool
	deadline     time.Duration
	// released is closed when a control line with "go" arrives; goAt is
	// its start time, written before the close (0: at once).
	released chan struct{}
	goAt     int64
}

func (l *lifetime) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&l.controlStdin, "control-stdin", false, "read JSON control lines from stdin, and stop when stdin closes")
	fs.DurationVar(&l.deadline, "deadline", 0, "exit with an error after this long (0: never)")
}

// start applies the deadline and reads the first control line. The
// returned context ends at the deadline, on stdin EOF (under
// --control-stdin) or when ctx ends; context.Cause says which. secret is
// nil without --control-stdin, or when the control line carries none.
// Later control lines are read as they come: one with "go" closes
// l.released (see waitGo).
func (l *lifetime) start(ctx context.Context, stdin io.Reader) (context.Context, func(), []byte, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := func() { cancel(nil) }
	if l.deadline > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeoutCause(ctx, l.deadline, fmt.Errorf("deadline of %s reached: stopping", l.deadline))
		stop = func() { cancelT(); cancel(nil) }
	}
	l.released = make(chan struct{})
	if !l.controlStdin {
		return ctx, stop, nil, nil
	}
	type line struct {
		b   []byte
		err error
	}
	first := make(chan line, 1)
	r := bufio.NewReader(stdin)
	go func() {
		b, err := r.ReadBytes('\n')
		if err == io.EOF && len(b) > 0 {
			err = nil
		}
		first <- line{b, err}
		if err != nil {
			cancel(errStdinClosed)
			return
		}
		// After the first line, stdin carries later control lines, and
		// signals stop by closing.
		released := false
		for {
			b, err := r.ReadBytes('\n')
			var c results.Control
			if !released && json.Unmarshal(b, &c) == nil && c.Go {
				l.goAt = c.AtUnixNs
				close(l.released)
				released = true
			}
			if err != nil {
				cancel(errStdinClosed)
				return
			}
		}
	}()
	var l1 line
	select {
	case l1 = <-first:
	case <-ctx.Done():
		stop()
		return nil, nil, nil, context.Cause(ctx)
	}
	if l1.err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("read control line from stdin: %w", errStdinClosed)
	}
	var c results.Control
	if err := json.Unmarshal(l1.b, &c); err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("parse control line from stdin: %w", err)
	}
	var secret []byte
	if c.Secret != "" {
		var err error
		if secret, err = hex.DecodeString(c.Secret); err != nil {
			stop()
			return nil, nil, nil, errors.New("parse control line from stdin: secret is not hex")
		}
	}
	return ctx, stop, secret, nil
}

// waitGo waits for the control line that says go, or for ctx to end.
// Without --control-stdin nothing could say go, so it returns at once.
func (l *lifetime) waitGo(ctx context.Context) error {
	if !l.controlStdin {
		return nil
	}
	select {
	case <-l.released:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The go may name a start time (results.Control.AtUnixNs).
	d := time.Until(time.Unix(0, l.goAt))
	if l.goAt == 0 || d <= 0 || d > results.MaxGoWait {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopReason turns an error caused by the node's own context ending into
// the reason it ended (stdin closed, deadline); other errors pass through.
func stopReason(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted: stopping: %w", context.Canceled)
	}
	return err
}

// sizeValue is a flag holding a size: plain bytes, or a number with KiB,
// MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000).
type sizeValue int64

func (s *sizeValue) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeValue) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeValue(n)
	return nil
}

// parseSize parses a size as plans write it (results.ParseSize), refusing
// a negative one.
func parseSize(v string) (int64, error) {
	n, err := results.ParseSize(v)
	if err == nil && n < 0 {
		err = fmt.Errorf("size %q is negative", v)
	}
	return n, err
}

// errorCode is the code of an error event: what kind of failure err is,
// for a program to act on (results.ErrorCode*).
func errorCode(err error) string {
	switch {
	case errors.Is(err, transport.ErrODPMismatch):
		return results.ErrorCodeODPVerifyMismatch
	case errors.Is(err, transport.ErrMismatch):
		return results.ErrorCodeVerifyMismatch
	case errors.Is(err, transport.ErrMemAvailable):
		return results.ErrorCodeMemAvailable
	case errors.Is(err, transport.ErrNeedsCM):
		return results.ErrorCodeNeedsCM
	}
	return ""
}
