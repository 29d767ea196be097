package peer

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
)

// TestRegistry: every registered peer has a name of its own, not node's,
// builds and parses through its own functions, and docs/workloads.md
// writes it out; an unknown name is ErrUnknown.
func TestRegistry(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/workloads.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, name := range Names() {
		tool, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if seen[name] || name == "node" || name == "" {
			t.Errorf("peer name %q: taken twice, or node's", name)
		}
		seen[name] = true
		if tool.build == nil || tool.parse == nil || tool.Binary == "" || len(tool.Roles) == 0 {
			t.Errorf("%s: want an argv builder, a parser, a binary and its roles", name)
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/workloads.md does not name %s", name)
		}
	}
	if _, err := Lookup("ib_readbw"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), strings.Join(Names(), ", ")) {
		t.Errorf("Lookup of an unknown peer: %v, want ErrUnknown listing the peers", err)
	}
}

// Every peer's binary is one an attached node may run (node run refuses
// any other program under node attach, results.PeerPrograms): a peer
// added here without it there would fail under Slurm and in pools.
func TestBinariesAreAttachable(t *testing.T) {
	for _, name := range Names() {
		tool, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(results.PeerPrograms, tool.Binary) {
			t.Errorf("peer %s runs %q, which results.PeerPrograms (%v) does not list: an attached node refuses it", name, tool.Binary, results.PeerPrograms)
		}
	}
}

// TestUnusedAreNodesOwn: what a peer does not use (so a plan expands its
// points once over a sweep of it) is node's own, and no peer's table
// takes, refuses or ignores one of them: a peer that did would have its
// value dropped by the plan.
func TestUnusedAreNodesOwn(t *testing.T) {
	for _, name := range Names() {
		unused, err := Unused(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(unused, "pipeline") || !slices.Contains(unused, "populate") {
			t.Errorf("%s: unused %v lacks node's pipeline and populate", name, unused)
		}
		tool, _ := Lookup(name)
		for _, m := range tool.Map {
			if slices.Contains(unused, m.Param.String()) {
				t.Errorf("%s: its table names %s, which Unused drops", name, m.Param)
			}
		}
	}
	if _, err := Unused("node"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Unused(node): %v, want ErrUnknown", err)
	}
}

// TestArgvAttachable: every argv the peers build, and the disk ceiling's
// fio runs, pass what an attached node checks before it runs a peer
// (results.CheckPeerArgs): a fio option added here and not there would
// be refused under Slurm and in pools.
func TestArgvAttachable(t *testing.T) {
	for _, name := range Names() {
		for _, p := range []Params{
			{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1, Duration: 2500 * time.Millisecond, Warmup: time.Second, Pattern: "sequential",
				Cache: "warm", Registration: "pinned", File: "/data/f", FileSize: 1 << 30, RDMAGIDIndex: 1, RDMADevice: "rxe0", ServerAddr: "h"},
			{BlockSize: 4096, QueueDepth: 32, QPs: 2, Total: 1 << 28, Pattern: "random",
				Cache: "cold", Registration: "pinned", File: "/data/f", FileSize: 1 << 30, RDMAGIDIndex: -1, ServerAddr: "h"},
		} {
			c, err := Build(name, p)
			if err != nil {
				continue // a peer that refuses these parameters builds nothing
			}
			for _, argv := range [][]string{c.Server, c.Client} {
				if err := results.CheckPeerArgs(argv); len(argv) > 0 && err != nil {
					t.Errorf("%s: an attached node refuses %q: %v", name, argv, err)
				}
			}
		}
	}
	for _, argv := range append(CeilingRuns("/data/f", 1<<30, 1<<40), CeilingProbe("/data/f", 1<<30), []string{"fio", "--version"}) {
		if err := results.CheckPeerArgs(argv); err != nil {
			t.Errorf("ceiling: an attached node refuses %q: %v", argv, err)
		}
	}
}
