package counters

import (
	"maps"
	"slices"
	"testing"

	"rdmasweep/testbed/testenv"
)

// TestNetdevOverNetlinkAsSysfs: the real /sys's device counters, read
// over netlink, carry the statistics files' names and values (each
// between a read of the files before and one after).
func TestNetdevOverNetlinkAsSysfs(t *testing.T) {
	before, err := Netdev("/no/such/sysfs/so/the/files", "lo")
	if err == nil {
		t.Fatal("a missing sysfs read without error")
	}
	files := func() Snapshot {
		s := Snapshot{}
		if err := ReadDir("/sys/class/net/lo/statistics", "", s); err != nil {
			testenv.Skip(t, "no /sys/class/net/lo/statistics here: "+err.Error())
		}
		return s
	}
	before = files()
	nl, err := netlinkStats("lo")
	if err != nil {
		t.Fatal(err)
	}
	after := files()
	if k, want := slices.Sorted(maps.Keys(nl)), slices.Sorted(maps.Keys(before)); !slices.Equal(k, want) {
		t.Errorf("netlink's names %v, the files' %v", k, want)
	}
	for name, v := range nl {
		if v < before[name] || v > after[name] {
			t.Errorf("%s: %d over netlink, %d and %d in the file before and after", name, v, before[name], after[name])
		}
	}
	if got, err := Netdev("/sys", "lo"); err != nil || len(got) != len(nl) {
		t.Errorf("Netdev(/sys, lo) = %d counters, %v; want netlink's %d", len(got), err, len(nl))
	}
}
