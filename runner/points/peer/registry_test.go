package peer

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

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
