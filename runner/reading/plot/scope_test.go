package plot

import (
	"testing"

	"rdmasweep/results"
)

func TestScopedKeepsOnlyTheScope(t *testing.T) {
	rows := []results.Row{{Scope: "client"}, {Scope: "aggregate"}, {Scope: "client"}}
	if got := Scoped(rows, ""); len(got) != 3 {
		t.Errorf("no scope kept %d rows, want all 3", len(got))
	}
	if got := Scoped(rows, "client"); len(got) != 2 || got[0].Scope != "client" || got[1].Scope != "client" {
		t.Errorf("scope client kept %+v", got)
	}
	if got := Scoped(rows, "nothing"); len(got) != 0 {
		t.Errorf("an unknown scope kept %d rows", len(got))
	}
	if n := Points([]Series{{Points: make([]Point, 2)}, {Points: make([]Point, 3)}}); n != 5 {
		t.Errorf("Points = %d, want 5", n)
	}
}
