package preflight

import (
	"errors"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
)

// points expands a two-point plan over both transports' fields with
// rdma.connect set to connect.
func points(t *testing.T, transport, connect string) []plan.Point {
	t.Helper()
	_, pts := expandPlan(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: `+transport+`
rdma: {connect: `+connect+`}
server: {file: /tmp/t.dat, file_size: 1MiB}
sweep: {matrix: {block_size: [4KiB, 64KiB]}}
`)
	return pts
}

func siw() Facts {
	f := roce()
	f.Devices[0].Name, f.Devices[0].Transport = "siw0", "iWARP"
	return f
}

// TestRefusalOfIWARPUnderTCPConnect: exec's gate refuses the points an
// iWARP device cannot connect, by the rule check judges with, with its
// hint, and lets through what the device can run.
func TestRefusalOfIWARPUnderTCPConnect(t *testing.T) {
	err := Refusal("client (b)", siw(), client(), points(t, "rdma", "tcp"))
	if err == nil {
		t.Fatal("siw0 under rdma.connect: tcp was not refused")
	}
	if !errors.Is(err, ErrUnfit) || err.Points != 2 || err.Device != "siw0" {
		t.Errorf("refusal %+v: want ErrUnfit, 2 points, siw0", err)
	}
	want := "client (b): siw0 is an iWARP device, which connects only through rdma_cm: refusing to run 2 points on it"
	if err.Error() != want || err.Hint() != "set rdma.connect: cm" {
		t.Errorf("refusal says %q, hint %q; want %q, hint %q", err.Error(), err.Hint(), want, "set rdma.connect: cm")
	}
	// The same rule as check's: Judge files the same problem.
	v := Judge(siw(), client())
	if len(v.Problems) != 1 || v.Problems[0].Msg != err.Msg || v.Problems[0].Hint != err.Hint() {
		t.Errorf("check judges %+v, exec refuses %+v", v.Problems, err.Problem)
	}

	for name, c := range map[string]struct {
		f   func() Facts
		pts []plan.Point
	}{
		"iWARP with cm":       {siw, points(t, "rdma", "cm")},
		"iWARP on a tcp plan": {siw, points(t, "tcp", "tcp")},
		"RoCE with tcp":       {roce, points(t, "rdma", "tcp")},
		"node chose another device": {func() Facts {
			f := siw()
			f.Devices = append(f.Devices, roce().Devices[0])
			f.Choice = &results.DeviceChoice{Device: "rxe0", IBPort: 1, GIDIndex: 3}
			return f
		}, points(t, "rdma", "tcp")},
		"node could not choose": {func() Facts {
			f := siw()
			f.ChoiceError = "no RDMA device's network interface holds 198.51.100.99"
			return f
		}, points(t, "rdma", "tcp")},
		"no device": {func() Facts { f := siw(); f.Devices = nil; return f }, points(t, "rdma", "tcp")},
	} {
		if err := Refusal("client (b)", c.f(), client(), c.pts); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	if err := Refusal("server (a)", siw(), server("rdma"), points(t, "rdma", "tcp")[:1]); err == nil || !strings.Contains(err.Error(), "refusing to run 1 point on it") {
		t.Errorf("one point: %v", err)
	}
}
