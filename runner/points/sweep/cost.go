package sweep

import (
	"fmt"
	"strings"
	"time"

	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/points/rounds"
)

// The runner's own time, measured (docs/performance.md): a point's wall
// time less its reads, median 58 ms over SSH ("Runner overhead per
// point"), and a pool round's, about 1.5 ms per host (94 ms at 64 hosts,
// "A whole pool at scale"). A disk's ceiling is one probe of 0.75 s and
// at most 8 grid runs of 2 s (peer.CeilingRuns).
const (
	RunOverhead          = 60 * time.Millisecond
	RoundOverheadPerHost = 1500 * time.Microsecond
	CeilingAtMost        = 17 * time.Second
)

// Cost is what an exec will take, told before it starts.
type Cost struct {
	Points, Repeat int
	Runs           int  // the runs to do (a search: at most)
	AtMost         bool // Runs and the estimate are a search's bound
	// A pool's hosts and topology, and per run its rounds and links.
	Pool, Rounds, Links int
	Topology            string
	// Reading is the runs' warmups and durations (warmup: steady at its
	// warmup_max), Overhead the runner's own time, Ceilings the disks
	// whose ceiling is measured before their first cold point.
	Reading, Overhead time.Duration
	Ceilings          int
	// Totals are the runs that read a total rather than for a duration:
	// the estimate leaves their reads out.
	Totals int
	// Worst is every run ended by timeouts.point.
	Worst time.Duration
}

// Estimate is the wall time the exec should take: its reads, the
// runner's overhead and the disks' ceilings.
func (c Cost) Estimate() time.Duration {
	return c.Reading + c.Overhead + time.Duration(c.Ceilings)*CeilingAtMost
}

// CostOf is the cost of running todo, the jobs left of pts (a search:
// its walks over pts).
func CostOf(p *plan.Plan, pts []plan.Point, todo []resume.Job) (Cost, error) {
	c := Cost{Points: len(pts), Repeat: p.Repeat, Runs: len(todo)}
	jobs := todo
	if p.Search != nil {
		// Each walk probes at most MaxProbes values, Repeat times each,
		// at its outer point's reads.
		c.Runs, c.AtMost, jobs = SearchRuns(p, len(pts)), true, nil
		per := SearchRuns(p, 1)
		for _, pt := range pts {
			for range per {
				jobs = append(jobs, resume.Job{Point: pt})
			}
		}
	}
	coldServers := map[string]bool{}
	for _, j := range jobs {
		v := j.Point.Values
		read, timed := readTime(v)
		per, overhead := 1, RunOverhead
		if hosts := len(j.Point.Hosts.Pool); hosts > 0 {
			rounds, links, err := schedule(j.Point)
			if err != nil {
				return Cost{}, err
			}
			c.Pool, c.Topology, c.Rounds, c.Links = hosts, v.Str(param.Topology), rounds, links
			per, overhead = rounds, time.Duration(hosts)*RoundOverheadPerHost
		}
		c.Reading += time.Duration(per) * read
		c.Overhead += time.Duration(per) * overhead
		if !timed {
			c.Totals++
		}
		c.Worst += p.Timeouts.Point * time.Duration(per)
		for _, r := range j.Point.Hosts.Roles() {
			serves := strings.HasPrefix(r.Name, "server") || strings.HasPrefix(r.Name, "pool")
			if serves && j.Point.For(r.Name).Str(param.Cache) == "cold" {
				coldServers[r.Host.Address] = true
			}
		}
	}
	c.Ceilings = len(coldServers)
	return c, nil
}

// readTime is how long one run of a point with values v reads: its warmup
// (warmup_max for steady) and its duration. timed is false when the point
// reads a total instead, whose time the plan does not say.
func readTime(v plan.Values) (d time.Duration, timed bool) {
	w := v.Duration(param.Warmup)
	if w < 0 {
		w = v.Duration(param.WarmupMax)
	}
	dur := v.Duration(param.Duration)
	return w + dur, dur > 0
}

// schedule is a pool point's rounds and links per run.
func schedule(pt plan.Point) (nRounds, links int, err error) {
	sched, err := rounds.Schedule(pt)
	if err != nil {
		return 0, 0, fmt.Errorf("scheduling the pool's rounds: %w", err)
	}
	for _, r := range sched {
		links += len(r)
	}
	return len(sched), links, nil
}

// String is the cost in a line, for people:
//
//	26 runs (26 points × 1 repetition): about 2m55s, 2m36s of it reading, up to 17.0s for the ceiling of 1 disk; at most 4h20m if every run hits timeouts.point
func (c Cost) String() string {
	var b strings.Builder
	runs := words.Count(c.Runs, "run")
	if c.AtMost {
		runs = "at most " + runs
	}
	fmt.Fprintf(&b, "%s (%s × %s)", runs, words.Count(c.Points, "point"), words.Count(c.Repeat, "repetition"))
	if c.Pool > 0 {
		fmt.Fprintf(&b, ", each %d hosts %s in %s, %s", c.Pool, c.Topology, words.Count(c.Rounds, "round"), words.Count(c.Links, "link"))
	}
	about := "about"
	if c.Totals > 0 {
		about = "at least"
	}
	fmt.Fprintf(&b, ": %s %s, %s of it reading", about, human(c.Estimate()), human(c.Reading))
	if c.Ceilings > 0 {
		fmt.Fprintf(&b, ", up to %s for the ceiling of %s", human(time.Duration(c.Ceilings)*CeilingAtMost), words.Count(c.Ceilings, "disk"))
	}
	if c.Totals > 0 {
		fmt.Fprintf(&b, ", besides the reads of the %s that read a total, at the rate they measure", words.Count(c.Totals, "run"))
	}
	fmt.Fprintf(&b, "; at most %s if every run hits timeouts.point", human(c.Worst))
	return b.String()
}

// human is d as a person reads it: 2h42m, 5m27s, 18.2s.
func human(d time.Duration) string {
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
