package main

// What every subcommand's file uses: its view of the process, usage
// errors, flag parsing with -h, and size flags.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"rdmasweep/node/session"
	"rdmasweep/results"
)

// env is a subcommand's view of the process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	out            *session.Printer
	// attached is a command node attach runs, whose command line came
	// from the runner: serve refuses to run without a secret there.
	attached bool
}

// attachedEnv marks a child of node attach --loop as attached.
const attachedEnv = "RDMASWEEP_NODE_ATTACHED"

type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// helpText is what -h asked for: run prints it once, on stdout, and
// node exits 0.
type helpText string

func (h helpText) Error() string { return string(h) }

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
