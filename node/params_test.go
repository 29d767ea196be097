package main

import (
	"flag"
	"testing"

	"rdmasweep/node/transport/tcp"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// TestParamsAreNodeFlags holds node to the parameter table: every
// parameter's flag is one the subcommand it goes to takes, so the runner's
// argv, built from the table, is always understood.
func TestParamsAreNodeFlags(t *testing.T) {
	sets := map[string]*flag.FlagSet{}
	for sub, o := range map[string]interface{ addFlags(*flag.FlagSet) }{"serve": &serveOptions{}, "read": &readOptions{}} {
		sets[sub] = flag.NewFlagSet(sub, flag.ContinueOnError)
		o.addFlags(sets[sub])
	}
	for _, p := range results.Params() {
		for sub, fs := range sets {
			if p.TakenBy(sub) && fs.Lookup(p.Flag) == nil {
				t.Errorf("parameter %s: node %s has no --%s", p.Name, sub, p.Flag)
			}
		}
	}
}

// TestLimitsAreTheTables holds every limit node enforces, outside the
// rdma transport's own (checked by its package's tests, which need cgo),
// to the parameter table, which runner validate reads.
func TestLimitsAreTheTables(t *testing.T) {
	bs := results.ParamOf(param.BlockSize)
	if max, _, _ := bs.LimitFor("tcp"); max != tcp.MaxBlock {
		t.Errorf("block_size for tcp: table %d, tcp.MaxBlock %d", max, tcp.MaxBlock)
	}
	if bs.Max != maxBlockFlag {
		t.Errorf("block_size: table max %d, node read takes up to %d", bs.Max, maxBlockFlag)
	}
}
