package plot

import "rdmasweep/results"

// Scoped are the rows of rows whose scope is scope (client, or
// aggregate), or all of them when scope is empty.
func Scoped(rows []results.Row, scope string) []results.Row {
	if scope == "" {
		return rows
	}
	var kept []results.Row
	for _, r := range rows {
		if r.Scope == scope {
			kept = append(kept, r)
		}
	}
	return kept
}

// Points counts the points of every series.
func Points(series []Series) int {
	n := 0
	for _, s := range series {
		n += len(s.Points)
	}
	return n
}
