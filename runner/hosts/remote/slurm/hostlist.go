package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// Hostnames expands a Slurm hostlist ("n[1-3,07],gpu1", "r[1-2]-n[01-02]")
// to its names, in order, as `scontrol show hostnames` does: ranges keep
// the width of their first bound's zeros, several bracket groups in one
// name multiply (the first outermost), no text may follow the last, and
// a name listed twice stays twice. It serves where no allocation exists
// to ask Slurm, as --nodes.
func Hostnames(list string) ([]string, error) {
	exprs, err := splitTop(list)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range exprs {
		expanded, err := expand(e)
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", list, err)
		}
		names = append(names, expanded...)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("hostlist %q names no hosts", list)
	}
	return names, nil
}

// splitTop splits list at the commas outside brackets.
func splitTop(list string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i, c := range list {
		switch c {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("hostlist %q: a bracket inside a bracket at byte %d", list, i)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("hostlist %q: a ] with no [ at byte %d", list, i)
			}
		case ',':
			if depth == 0 {
				out = append(out, list[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("hostlist %q: a [ with no ]", list)
	}
	out = append(out, list[start:])
	var kept []string
	for _, e := range out {
		if e = strings.TrimSpace(e); e != "" {
			kept = append(kept, e)
		}
	}
	return kept, nil
}

// expand is one name expression's names: its text up to the first bracket
// group, each of the group's values, then the rest expanded in turn.
func expand(e string) ([]string, error) {
	open := strings.IndexByte(e, '[')
	if open < 0 {
		return []string{e}, nil
	}
	closing := open + strings.IndexByte(e[open:], ']')
	values, err := ranges(e[open+1 : closing])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	tail := e[closing+1:]
	if tail != "" && !strings.Contains(tail, "[") {
		// Slurm's too: "n[1-2]-x" is no hostlist.
		return nil, fmt.Errorf("%s: text after the last ] (%q)", e, tail)
	}
	rest, err := expand(tail)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range values {
		for _, r := range rest {
			out = append(out, e[:open]+v+r)
		}
	}
	return out, nil
}

// maxRange bounds one range, as a typo like n[1-100000000] should be an
// error, not a hang.
const maxRange = 1 << 20

// ranges is the values of a bracket group's body: "1-3,07" is 1 2 3 07.
func ranges(body string) ([]string, error) {
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("invalid range %q: want numbers like 1-8 or 01-16", r)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("invalid range %q: want a low bound, a dash and a high bound not below it", r)
			}
		}
		if b-a >= maxRange {
			return nil, fmt.Errorf("range %q has more than %d values", r, maxRange)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}
