package results

import (
	"strings"
	"testing"
)

// TestColdIsProven holds the rule for a cold row of node: the disk read
// at least 0.95 of the bytes the point had to bring in (file_size, or the
// bytes read when fewer), and at most 2 % of the file was cached at its
// start; anything else is "not proven cold", with the reason.
func TestColdIsProven(t *testing.T) {
	const file = 64 << 20
	row := func(cache, workload string, bytes, disk int64, cached float64, hasDisk bool) Row {
		r := Row{Status: StatusOK, Params: map[string]string{"cache": cache, "workload": workload, "file_size": "67108864"}, Bytes: ref(bytes), CachedFraction: ref(cached)}
		if hasDisk {
			r.DiskReadBytes = ref(disk)
		}
		return r
	}
	for _, c := range []struct {
		name     string
		r        Row
		fraction float64 // -1: none
		why      string  // "" proven (or the rule does not apply), else in the reason
	}{
		{"read from the disk", row("cold", "node", file, file, 0, true), 1, ""},
		{"at the edges", row("cold", "node", file, file*95/100+1, ColdCachedMax, true), 0.95, ""},
		{"fewer bytes than the file", row("cold", "node", file/4, file/4, 0, true), 1, ""},
		{"the disk read half", row("cold", "node", file, file/2, 0, true), 0.5, "the disk read 0.50"},
		{"just under", row("cold", "node", file, file*94/100, 0, true), 0.94, "the disk read 0.94"},
		{"cached at its start", row("cold", "node", file, file, 0.03, true), 1, "3.0 % of the file was cached"},
		{"no disk under it", row("cold", "node", file, 0, 0, false), -1, "no disk read was counted"},
		{"older row without a workload", row("cold", "", file, file/2, 0, true), 0.5, "the disk read 0.50"},
		{"warm", row("warm", "node", file, 0, 1, true), -1, ""},
		{"a peer", row("cold", "fio", file, 0, 0, true), -1, ""},
	} {
		r := c.r
		r.SetColdReadFraction()
		switch {
		case c.fraction < 0 && r.ColdReadFraction != nil:
			t.Errorf("%s: cold_read_fraction %v, want none", c.name, *r.ColdReadFraction)
		case c.fraction >= 0 && (r.ColdReadFraction == nil || *r.ColdReadFraction < c.fraction-0.005 || *r.ColdReadFraction > c.fraction+0.005):
			t.Errorf("%s: cold_read_fraction %v, want %.2f", c.name, r.ColdReadFraction, c.fraction)
		}
		why := r.NotCold()
		if c.why == "" && why != "" || c.why != "" && (!strings.HasPrefix(why, "not proven cold: ") || !strings.Contains(why, c.why)) {
			t.Errorf("%s: NotCold() = %q, want %q", c.name, why, c.why)
		}
	}
	failed := row("cold", "node", file, 0, 1, true)
	failed.Status = StatusFailed
	if why := failed.NotCold(); why != "" {
		t.Errorf("a failed row: NotCold() = %q; its failure says enough", why)
	}
}

// TestDiskCeilingOnColdRows: a run's ceiling goes on its ok cold rows of
// the host it was measured on, and nowhere else.
func TestDiskCeilingOnColdRows(t *testing.T) {
	byHost := map[string]float64{"a": 1450}
	for _, c := range []struct {
		host, cache, status string
		want                bool
	}{
		{"a", "cold", StatusOK, true},
		{"a", "warm", StatusOK, false},
		{"a", "cold", StatusFailed, false},
		{"b", "cold", StatusOK, false},
	} {
		r := Row{ServerHost: c.host, Status: c.status, Params: map[string]string{"cache": c.cache}, DiskCeilingMBs: ref(1.0)}
		r.SetDiskCeiling(byHost)
		if got := r.DiskCeilingMBs != nil && *r.DiskCeilingMBs == byHost["a"]; got != c.want || !c.want && r.DiskCeilingMBs != nil {
			t.Errorf("%s %s %s: disk_ceiling_mb_s %v, want it set %v", c.host, c.cache, c.status, r.DiskCeilingMBs, c.want)
		}
	}
}
