package main

import (
	"strings"
	"testing"

	"rdmasweep/node/transport/rdma"
)

// TestPrintDevicesRates: node devices' table gives each port's link with
// its signalling rate, and the line rate as the CSV records it: 4X QDR
// carries 4000 MB/s of its 40 Gb/s; an unknown one says why.
func TestPrintDevicesRates(t *testing.T) {
	rate := 4000.0
	devs := []rdma.Device{
		{Name: "mlx5_0", Transport: "InfiniBand", Ports: []rdma.Port{{Port: 1, State: "ACTIVE", LinkLayer: "InfiniBand", Width: "4x", Speed: "QDR", RateGbps: 40, LineRateMBs: &rate}}},
		{Name: "rxe1", Transport: "InfiniBand", Ports: []rdma.Port{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet", Width: "1x", Speed: "SDR", RateGbps: 2.5, LineRateUnknown: "rxe1 port 1: eth1: speed is -1"}}},
	}
	var b strings.Builder
	if err := printDevices(&b, devs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"4x QDR (40 Gb/s signalling)", "line rate 4000.0 MB/s", "line rate unknown (rxe1 port 1: eth1: speed is -1)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("node devices lacks %q:\n%s", want, b.String())
		}
	}
}
