package linerate

import (
	"net"
	"slices"
	"testing"
)

// TestIfacesAsTheStdlib: the two-dump listing gives every device the
// addresses the standard library finds for it, one dump a device.
func TestIfacesAsTheStdlib(t *testing.T) {
	got, err := Ifaces()
	if err != nil {
		t.Fatal(err)
	}
	nis, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(nis) {
		t.Fatalf("%d devices, the standard library lists %d", len(got), len(nis))
	}
	for i, ni := range nis {
		addrs, err := ni.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				want = append(want, n.IP.String())
			}
		}
		var have []string
		for _, ip := range got[i].Addrs {
			have = append(have, ip.String())
		}
		slices.Sort(want)
		slices.Sort(have)
		if got[i].Name != ni.Name || !slices.Equal(have, want) {
			t.Errorf("%s: %v, want %s: %v", got[i].Name, have, ni.Name, want)
		}
	}
	for _, i := range got {
		if i.Loopback && i.Kind != "" {
			t.Errorf("%s: a loopback of kind %q", i.Name, i.Kind)
		}
	}
	if len(got) > 0 && !slices.ContainsFunc(got, func(i Iface) bool { return i.Loopback && len(i.Addrs) > 0 }) {
		t.Errorf("no loopback device with an address in %+v", got)
	}
}
