package sweep

// A link's capacity (docs/telemetry.md#what-bound-a-row): the line rate at
// the protocol's payload share where the NIC reports a rate; where it
// reports none (virtio, some VFs), what the transport's peer reads at
// 1 MiB between the two hosts (probe.LinkCapacity), measured once per
// exec, host pair and transport, just after the first point that needed
// it and before its rows are judged, and recorded in the manifest.

import (
	"context"
	"fmt"
	"sync"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/points/preflight"
)

// Links measures and keeps the capacities of links without a line rate
// for one exec of a plan of servers and clients (a pool's links are left
// unmeasured).
type Links struct {
	Plan *plan.Plan
	// HostOf is the host name a role's rows carry (server_host,
	// client_host).
	HostOf func(role string) string
	// Measure measures the link between pair's hosts over transport, as
	// probe.Env.LinkCapacity does; ok is false when ctx ended.
	Measure func(ctx context.Context, pt plan.Point, pair preflight.Pair, transport string) (lc manifest.LinkCapacity, ok bool)
	Rec     *manifest.Record
	Info    func(msg string)
	Warn    func(msg string)

	mu   sync.Mutex
	done map[string]bool // by results.LinkKey: measured or given up on
}

// Set sets each row's link capacity: from its line rate, or measured
// between its hosts, first measuring the links pt's rows need that have
// no capacity yet. l may be nil: line rates alone.
func (l *Links) Set(ctx context.Context, pt plan.Point, rows []results.Row) {
	var measured map[string]float64
	if l != nil {
		for _, r := range rows {
			if r.NeedsLinkCapacity() {
				l.measure(ctx, pt, r)
			}
		}
		measured = l.Rec.LinkCapacities()
	}
	for i := range rows {
		rows[i].SetLinkCapacity(measured)
	}
}

// measure measures the link r crossed, once.
func (l *Links) measure(ctx context.Context, pt plan.Point, r results.Row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := results.LinkKey(r.ServerHost, r.ClientHost, r.Transport())
	if l.done[key] || l.Plan.IsPool() {
		return
	}
	if l.done == nil {
		l.done = map[string]bool{}
	}
	l.done[key] = true
	var pair *preflight.Pair
	for _, p := range preflight.Pairs(l.Plan) {
		if l.HostOf(p.Server.Name) == r.ServerHost && l.HostOf(p.Client.Name) == r.ClientHost {
			pair = &p
			break
		}
	}
	if pair == nil {
		return
	}
	l.Info(fmt.Sprintf("%s → %s reports no line rate (%s): measuring the link over %s at 1 MiB", r.ServerHost, r.ClientHost, r.LineRateUnknown, r.Transport()))
	lc, ok := l.Measure(ctx, pt, *pair, r.Transport())
	if !ok {
		return
	}
	if lc.Error != "" {
		l.Warn(fmt.Sprintf("%s → %s: the link was not measured, so link_capacity_mb_s stays empty: %s", r.ServerHost, r.ClientHost, lc.Error))
	} else {
		l.Info(fmt.Sprintf("link %s → %s over %s: %.1f MB/s (%s at 1 MiB)", r.ServerHost, r.ClientHost, lc.Transport, lc.MBs, lc.Workload))
	}
	if err := l.Rec.AddLinkCapacity(lc); err != nil {
		l.Warn(fmt.Sprintf("the manifest lacks the link capacity of %s → %s: %v", r.ServerHost, r.ClientHost, err))
	}
}
