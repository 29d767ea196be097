package results

import (
	"testing"

	"rdmasweep/results/param"
)

// fakeValues are a point's values by name; an Auto param left to auto
// is -1, as plan's values read.
type fakeValues map[param.ID]int64

func (v fakeValues) Int(id param.ID) int64 { return v[id] }
func (v fakeValues) Str(id param.ID) string {
	if id == param.Rate && v[id] != 0 {
		return "100MB/s" // any rate: the value is not what the cell reads
	}
	return ""
}
func (v fakeValues) Bool(param.ID) bool { return false }

// TestCQModerationCell: cq_moderation's cell is the value node will use:
// for auto max(1, queue_depth per QP ÷ 4), so a QP signals while three
// quarters of its READs are in flight, for an N asked for N up to the
// depth per QP (node cannot leave more READs of a QP unsignalled).
func TestCQModerationCell(t *testing.T) {
	p := ParamByName("cq_moderation")
	for _, c := range []struct {
		v    fakeValues
		want string
	}{
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 16, param.QPs: 1}, "4"},
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 8, param.QPs: 1}, "2"},
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 7, param.QPs: 1}, "1"}, // rounds down: never a whole window
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 1024, param.QPs: 1}, "256"},
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 32, param.QPs: 2}, "4"},
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 1, param.QPs: 4}, "1"},
		{fakeValues{param.CQModeration: 1, param.QueueDepth: 128, param.QPs: 1}, "1"},
		{fakeValues{param.CQModeration: 8, param.QueueDepth: 4, param.QPs: 1}, "4"},
		{fakeValues{param.CQModeration: 8, param.QueueDepth: 64, param.QPs: 4}, "8"},
		{fakeValues{param.CQModeration: 8, param.QueueDepth: 16, param.QPs: 4}, "4"},
		// An open loop signals every READ.
		{fakeValues{param.CQModeration: -1, param.QueueDepth: 16, param.QPs: 1, param.Rate: 1}, "1"},
	} {
		if got := p.Cell("rdma", c.v); got != c.want {
			t.Errorf("cq_moderation cell for %v = %q, want %q", c.v, got, c.want)
		}
	}
	if got := p.Cell("tcp", fakeValues{param.CQModeration: -1, param.QueueDepth: 16}); got != "" {
		t.Errorf("tcp: %q, want empty", got)
	}
}

// TestRowTakesNodesCQModeration: a row of a run node reported on carries
// node's own cq_moderation, whatever the plan's cell predicted.
func TestRowTakesNodesCQModeration(t *testing.T) {
	r := Row{Params: map[string]string{"cq_moderation": "8"}}
	r.SetResult(&Result{RDMAPath: &RDMAPath{CQModeration: 4}})
	if got := r.Params["cq_moderation"]; got != "4" {
		t.Errorf("cq_moderation cell %q after node reported 4, want 4", got)
	}
	r = Row{Params: map[string]string{"cq_moderation": ""}}
	r.SetResult(&Result{})
	if got := r.Params["cq_moderation"]; got != "" {
		t.Errorf("tcp row: cq_moderation cell %q, want empty", got)
	}
}
