package results

import "testing"

// fakeValues are a point's values by name; an Auto param left to auto
// is -1, as plan's values read.
type fakeValues map[string]int64

func (v fakeValues) Int(name string) int64 { return v[name] }
func (v fakeValues) Str(string) string     { return "" }
func (v fakeValues) Bool(string) bool      { return false }

// TestCQModerationCell: an auto cq_moderation's cell is the value node
// uses, min(100, queue_depth per QP), and an explicit one is the plan's.
func TestCQModerationCell(t *testing.T) {
	p := ParamByName("cq_moderation")
	for _, c := range []struct {
		v    fakeValues
		want string
	}{
		{fakeValues{"cq_moderation": -1, "queue_depth": 16, "qps": 1}, "16"},
		{fakeValues{"cq_moderation": -1, "queue_depth": 128, "qps": 1}, "100"},
		{fakeValues{"cq_moderation": -1, "queue_depth": 32, "qps": 2}, "16"},
		{fakeValues{"cq_moderation": -1, "queue_depth": 1, "qps": 4}, "1"},
		{fakeValues{"cq_moderation": 1, "queue_depth": 128, "qps": 1}, "1"},
		{fakeValues{"cq_moderation": 8, "queue_depth": 4, "qps": 1}, "8"},
	} {
		if got := p.Cell("rdma", c.v); got != c.want {
			t.Errorf("cq_moderation cell for %v = %q, want %q", c.v, got, c.want)
		}
	}
	if got := p.Cell("tcp", fakeValues{"cq_moderation": -1, "queue_depth": 16}); got != "" {
		t.Errorf("tcp: %q, want empty", got)
	}
}
