package compare

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
)

// Gate is one --fail-on threshold: a significant change of Metric beyond
// Pct, below it when Below (bandwidth_mb_s<-5%), above it otherwise
// (lat_p99_us>10%).
type Gate struct {
	Metric string
	Below  bool
	Pct    float64
	text   string
}

func (g Gate) String() string { return g.text }

// ParseGate reads METRIC<PCT% or METRIC>PCT%.
func ParseGate(s string) (Gate, error) {
	i := strings.IndexAny(s, "<>")
	if i <= 0 || !strings.HasSuffix(s, "%") {
		return Gate{}, fmt.Errorf("--fail-on must be METRIC<PCT%% or METRIC>PCT%%, e.g. 'bandwidth_mb_s<-5%%' (got %q)", s)
	}
	g := Gate{Metric: strings.TrimSpace(s[:i]), Below: s[i] == '<', text: s}
	pct, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s[i+1:], "%")), 64)
	if err != nil {
		return Gate{}, fmt.Errorf("--fail-on %q: %q is not a percentage", s, s[i+1:])
	}
	g.Pct = pct
	if !slices.Contains(results.MetricColumns(), g.Metric) {
		return Gate{}, fmt.Errorf("--fail-on %q: %q is not a numeric result column%s", s, g.Metric, plan.Suggest(g.Metric, results.MetricColumns()))
	}
	return g, nil
}

// Trips reports whether pt is a significant change beyond the gate.
func (g Gate) Trips(pt Point) bool {
	if pt.Metric != g.Metric || !pt.Significant {
		return false
	}
	if g.Below {
		return pt.DeltaPct < g.Pct
	}
	return pt.DeltaPct > g.Pct
}
