package compare

import (
	"fmt"
	"slices"
	"strings"
)

// Flags are compare's settings as the user gives them, before they are
// checked: the raw --between, --by, --metric, --alpha, --format and
// --fail-on.
type Flags struct {
	Between, By, Format string
	Metrics, FailOn     []string
	Alpha               float64
}

// Setup checks f's values against each other and turns them into the
// Options of Compare and the gates to judge its result by. A metric a
// gate names is compared even when --metric leaves it out. Its errors
// name the flag at fault.
func Setup(f Flags) (Options, []Gate, error) {
	opts := Options{Metrics: slices.Clone(f.Metrics), Alpha: f.Alpha}
	switch {
	case !(f.Alpha > 0 && f.Alpha < 1):
		return opts, nil, fmt.Errorf("--alpha must lie between 0 and 1 (got %v)", f.Alpha)
	case !slices.Contains(Formats, f.Format):
		return opts, nil, fmt.Errorf("--format must be one of %s (got %q)", strings.Join(Formats, ", "), f.Format)
	}
	if f.Between != "" {
		a, b, err := ParseBetween(f.Between)
		if err != nil {
			return opts, nil, err
		}
		opts.Between = &[2]Cond{a, b}
	}
	if f.By != "" {
		opts.By = strings.Split(f.By, ",")
	}
	var gates []Gate
	for _, s := range f.FailOn {
		g, err := ParseGate(s)
		if err != nil {
			return opts, nil, err
		}
		gates = append(gates, g)
		if len(opts.Metrics) > 0 && !slices.Contains(opts.Metrics, g.Metric) {
			opts.Metrics = append(opts.Metrics, g.Metric)
		}
	}
	if len(opts.Metrics) == 0 {
		opts.Metrics = slices.Clone(DefaultMetrics)
		for _, g := range gates {
			if !slices.Contains(opts.Metrics, g.Metric) {
				opts.Metrics = append(opts.Metrics, g.Metric)
			}
		}
	}
	return opts, gates, nil
}

// Warning is one cause the comparisons were warned of, and how many of
// them it touches.
type Warning struct {
	Text  string
	Count int
}

// Warnings are res's warnings, once per cause, in the order first seen.
func Warnings(res Result) []Warning {
	var ws []Warning
	at := map[string]int{}
	for _, pt := range res.Points {
		for _, w := range pt.Warnings {
			i, ok := at[w]
			if !ok {
				i = len(ws)
				at[w] = i
				ws = append(ws, Warning{Text: w})
			}
			ws[i].Count++
		}
	}
	return ws
}

// Trip is a gate that tripped, and at how many points.
type Trip struct {
	Gate   Gate
	Points int
}

// Tripped are the gates that trip at some point of res, in gates' order.
func Tripped(res Result, gates []Gate) []Trip {
	var trips []Trip
	for _, g := range gates {
		n := 0
		for _, pt := range res.Points {
			if g.Trips(pt) {
				n++
			}
		}
		if n > 0 {
			trips = append(trips, Trip{Gate: g, Points: n})
		}
	}
	return trips
}
