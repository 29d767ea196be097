package summary

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
)

// RunCounters are the counters sidecars' lines of the runs rows come
// from, by run ID.
type RunCounters map[string][]manifest.CounterLine

// ReadRunCounters reads the counters sidecar beside csvPath of each run
// that rows come from.
func ReadRunCounters(csvPath string, rows []results.Row) (RunCounters, error) {
	byRun := RunCounters{}
	for _, r := range rows {
		if _, ok := byRun[r.RunID]; ok {
			continue
		}
		lines, err := manifest.ReadCounters(manifest.CountersPathFor(csvPath, r.RunID))
		if err != nil {
			return nil, err
		}
		byRun[r.RunID] = lines
	}
	return byRun, nil
}

// WriteCounters prints, for each run of each point in rows (in their
// order, once per point and repetition), every counter that moved on each
// role, under the kernel's name, with the devices they were read from and
// why a group could not be read. A run whose roles reported no counters
// (an older node, a peer workload) says so.
func WriteCounters(out io.Writer, rows []results.Row, byRun RunCounters) error {
	w := new(strings.Builder)
	vary := varying(rows)
	seen := map[string]bool{}
	first := true
	for _, r := range rows {
		id := fmt.Sprintf("%s/%s/%d", r.RunID, r.PointKey, r.Repetition)
		if seen[id] {
			continue
		}
		seen[id] = true
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		fmt.Fprintf(w, "%s r%d (point %s, run %s)\n", label(r, vary), r.Repetition, r.PointKey, r.RunID)
		n := 0
		for _, l := range byRun[r.RunID] {
			if l.PointKey == r.PointKey && l.Repetition == r.Repetition {
				writeRole(w, l)
				n++
			}
		}
		if n == 0 {
			fmt.Fprintln(w, "  no counters recorded")
		}
	}
	_, err := io.WriteString(out, w.String())
	return err
}

// writeRole prints one role's nonzero deltas, sorted by name.
func writeRole(w io.Writer, l manifest.CounterLine) {
	var from []string
	c := l.Counters
	if c.DiskDevice != "" {
		from = append(from, "disk "+c.DiskDevice)
	}
	if c.RDMADevice != "" {
		from = append(from, fmt.Sprintf("rdma %s port %d (%s)", c.RDMADevice, c.RDMAPort, c.RDMAFamily))
	}
	if c.Netdev != "" {
		from = append(from, "netdev "+c.Netdev)
	}
	fmt.Fprintf(w, "  %s on %s", l.Role, l.Host)
	if len(from) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(from, ", "))
	}
	fmt.Fprintln(w)
	var names []string
	width := 0
	for name, v := range c.Raw {
		if v != 0 {
			names = append(names, name)
			width = max(width, len(name))
		}
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "    %-*s  %d\n", width, name, c.Raw[name])
	}
	if len(names) == 0 && len(c.Reported) == 0 {
		fmt.Fprintln(w, "    no counter moved")
	}
	reported := make([]string, 0, len(c.Reported))
	for name := range c.Reported {
		reported = append(reported, name)
	}
	sort.Strings(reported)
	for _, name := range reported {
		fmt.Fprintf(w, "    %s %g (the peer's own report)\n", name, c.Reported[name])
	}
	groups := make([]string, 0, len(c.Unread))
	for g := range c.Unread {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		fmt.Fprintf(w, "    %s not read: %s\n", g, c.Unread[g])
	}
}

// varying are the parameters whose values differ between rows' points.
func varying(rows []results.Row) []Param {
	var out []Param
	for _, p := range Params {
		if p.Name == "scope" {
			continue
		}
		vals := map[string]bool{}
		for _, r := range rows {
			vals[p.Value(r)] = true
		}
		if len(vals) > 1 {
			out = append(out, p)
		}
	}
	return out
}

// label names r's point by the parameters that vary.
func label(r results.Row, vary []Param) string {
	if len(vary) == 0 {
		return r.Plan
	}
	parts := make([]string, len(vary))
	for i, p := range vary {
		parts[i] = p.Name + "=" + p.Value(r)
	}
	return strings.Join(parts, " ")
}
