package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"rdmasweep/results"
)

// checkParamFlags holds the flags of role's parameters ("serve" or
// "read", as results.Param.Role names them) to the schema, where runner
// validate reads the same bounds: the kind's syntax, Enum, Min and Max,
// and the transport's Limit, with its reason. It reports every flag out of
// bounds at once, each named as the command line names it. The transports
// take these values as given: this is where they are checked.
//
// An Auto parameter at its flag's default is node's auto (--ib-port 0,
// --gid-index -1, --max-rd-atomic 0) and is not bounded.
func checkParamFlags(fs *flag.FlagSet, cmd, role, transport string) error {
	var errs []string
	for _, p := range results.Params() {
		if !p.TakenBy(role) {
			continue
		}
		f := fs.Lookup(p.Flag)
		if f == nil || p.Auto && (f.Value.String() == f.DefValue || f.Value.String() == p.AutoText()) {
			continue
		}
		if msg := paramFlagProblem(p, f.Value.String(), transport); msg != "" {
			errs = append(errs, fmt.Sprintf("--%s %s", p.Flag, msg))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	// One line: node's error event is one line, and so is a row's cell.
	return usagef("%s: %s", cmd, strings.Join(errs, "; "))
}

// paramFlagProblem says what is wrong with a flag's value s of p under
// transport, or "".
func paramFlagProblem(p *results.Param, s, transport string) string {
	var n int64
	switch p.Kind {
	case results.KindEnum:
		if !slices.Contains(p.Enum, s) {
			return fmt.Sprintf("must be %s (got %q)", strings.Join(p.Enum, " or "), s)
		}
		return ""
	case results.KindSize, results.KindInt:
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Sprintf("must be a whole number (got %q)", s)
		}
	case results.KindRate:
		if _, err := results.ParseRate(s); err != nil {
			return err.Error()
		}
		return ""
	case results.KindDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Sprintf("must be a duration like 5s (got %q)", s)
		}
		n = int64(d)
	default:
		return ""
	}
	show := func(v int64) string {
		switch p.Kind {
		case results.KindSize:
			return results.FormatSize(v)
		case results.KindDuration:
			return time.Duration(v).String()
		}
		return strconv.FormatInt(v, 10)
	}
	if n < p.Min {
		return fmt.Sprintf("must be at least %s (got %s)", show(p.Min), show(n))
	}
	if max, why, ok := p.LimitFor(transport); ok && n > max {
		if why != "" {
			return fmt.Sprintf("must be at most %s with --transport %s: %s (got %s)", show(max), transport, why, show(n))
		}
		return fmt.Sprintf("must be at most %s (got %s)", show(max), show(n))
	}
	return ""
}
