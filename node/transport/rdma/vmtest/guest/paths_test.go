//go:build rdmaguest

package guest

// Which device and GID a run lands on, how its QPs connect (node's
// exchange or rdma_cm, on RoCE and iWARP), and the QP attributes: depth,
// completion moderation and the fabric fields.

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"rdmasweep/node/transport/rdma"
	"rdmasweep/results"
)

// TestMultiNIC runs serve and read, as a plan that names no device would,
// over the second NIC's subnet: both must land on rxe1, the device whose
// netdev holds the address, and say so with the GID they used.
func TestMultiNIC(t *testing.T) {
	ready, res, done := point(t, "", serveArgs(t, "4MiB", "--listen", guestIP1),
		[]string{"--block-size", "64KiB", "--queue-depth", "4", "--total", "4MiB", "--verify"})
	for _, c := range []struct {
		side string
		p    *results.RDMAPath
	}{{"server", ready.RDMAPath}, {"client", res.RDMAPath}} {
		if c.p == nil || c.p.Device != "rxe1" || c.p.GID != "::ffff:"+guestIP1 || c.p.GIDType != "RoCE v2" {
			t.Errorf("%s over %s used %+v; want rxe1 with RoCE v2 GID ::ffff:%s", c.side, guestIP1, c.p, guestIP1)
		}
	}
	if !res.Verified || done.BytesServed != 4<<20 {
		t.Errorf("result verified %v, server served %d bytes", res.Verified, done.BytesServed)
	}
	t.Logf("server %s gid %d %s, client %s gid %d %s", ready.Device, *ready.GIDIndex, ready.GID, res.Device, *res.GIDIndex, res.GID)

	// runner check asks node the same question without running a point.
	out, err := exec.Command(nodeBin(t), "devices", "--json", "--address", guestIP1).Output()
	var l results.DevicesList
	if err != nil || json.Unmarshal(out, &l) != nil || l.Choice == nil || l.Choice.Device != "rxe1" || l.Choice.GID != "::ffff:"+guestIP1 || l.Choice.GIDIndex != *res.GIDIndex {
		t.Errorf("node devices --address %s: %v, %s; want the choice the run made", guestIP1, err, out)
	}
	out, _ = exec.Command(nodeBin(t), "devices", "--json", "--address", "10.0.9.9").Output()
	var none results.DevicesList
	if json.Unmarshal(out, &none) != nil || none.Choice != nil || !strings.Contains(none.ChoiceError, "no RDMA device holds address 10.0.9.9") {
		t.Errorf("node devices --address 10.0.9.9: %s; want the refusal a run would give", out)
	}
}

// TestWildcardListen: a wildcard listen address says nothing of the
// device the region must be registered on, so it is refused unless a
// device is named.
func TestWildcardListen(t *testing.T) {
	msg := failure(t, start(t, "", serveArgs(t, "1MiB", "--listen", "0.0.0.0")...))
	if !strings.Contains(msg, "listening on all addresses") || !strings.Contains(msg, "rdma.device") {
		t.Errorf("wildcard listen: %q, want a refusal naming data_address and rdma.device", msg)
	}
	srv := start(t, "", serveArgs(t, "1MiB", "--listen", "0.0.0.0", "--rdma-device", "rxe1", "--accept-timeout", "2s")...)
	ready := until[results.Ready](t, srv, "ready")
	if ready.Device != "rxe1" {
		t.Errorf("wildcard listen with rxe1 named: device %q", ready.Device)
	}
	failure(t, srv) // no client: accept timeout
}

// TestDepth posts 64 READs on one QP with 4 on the wire, as perftest's tx
// depth over its outstanding reads: verified, and the QP says 4.
func TestDepth(t *testing.T) {
	_, res, _ := point(t, "", serveArgs(t, "4MiB"),
		[]string{"--block-size", "16KiB", "--queue-depth", "64", "--qps", "1", "--max-rd-atomic", "4", "--total", "8MiB", "--verify"})
	if !res.Verified || res.Bytes != 8<<20 || res.MaxRdAtomic != 4 || res.QueueDepthPerQP != 64 {
		t.Errorf("qd 64 over max_rd_atomic 4: verified %v, %d bytes, max_rd_atomic %d, depth per QP %d", res.Verified, res.Bytes, res.MaxRdAtomic, res.QueueDepthPerQP)
	}
	_, res, _ = point(t, "", serveArgs(t, "4MiB"), []string{"--block-size", "16KiB", "--queue-depth", "8", "--total", "1MiB"})
	if d := device(t, "rxe0"); res.MaxRdAtomic != min(d.MaxQPInitRdAtom, d.MaxQPRdAtom) {
		t.Errorf("default max_rd_atomic %d, want the negotiated maximum %d", res.MaxRdAtomic, min(d.MaxQPInitRdAtom, d.MaxQPRdAtom))
	}
}

// TestCQModeration signals every 8th READ: every read is still counted and
// verified, and the latency comes from the signalled ones. Duration mode
// ends with unsignalled READs in flight on both QPs, which the fences
// must bring home.
func TestCQModeration(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"total", []string{"--block-size", "4KiB", "--queue-depth", "16", "--cq-moderation", "8", "--total", "4MiB", "--verify"}},
		{"duration-2qps", []string{"--block-size", "4KiB", "--queue-depth", "16", "--qps", "2", "--cq-moderation", "3", "--duration", "2s", "--verify", "--pattern", "random"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, res, done := point(t, "", serveArgs(t, "4MiB"), c.args)
			if !res.Verified || res.Reads == 0 || res.LatSamples == 0 || res.LatSamples >= res.Reads || res.CQModeration == 0 {
				t.Errorf("cq moderation: verified %v, %d reads, %d latency samples, cq_moderation %d; want every read verified and fewer samples", res.Verified, res.Reads, res.LatSamples, res.CQModeration)
			}
			if done.Requests != res.Reads {
				t.Errorf("server counts %d reads, client %d", done.Requests, res.Reads)
			}
			t.Logf("%d reads, %d timed, p50 %.0f µs, %.0f IOPS", res.Reads, res.LatSamples, res.LatP50Us, res.IOPS)
		})
	}
}

// TestFabric sets every fabric field on both roles: the client's QP must
// carry them (read back with ibv_query_qp), and the server report them.
func TestFabric(t *testing.T) {
	f := []string{"--traffic-class", "96", "--service-level", "0", "--pkey-index", "0", "--qp-timeout", "18", "--retry-cnt", "5", "--rnr-retry", "3", "--min-rnr-timer", "10"}
	ready, res, _ := point(t, "", serveArgs(t, "1MiB", f...), append([]string{"--block-size", "4KiB", "--total", "64KiB", "--verify"}, f...))
	want := results.RDMAPath{TrafficClass: 96, Timeout: 18, RetryCnt: 5, RNRRetry: 3, MinRNRTimer: 10}
	for _, c := range []struct {
		side string
		p    *results.RDMAPath
	}{{"server", ready.RDMAPath}, {"client", res.RDMAPath}} {
		got := *c.p
		if got.TrafficClass != want.TrafficClass || got.Timeout != want.Timeout || got.RetryCnt != want.RetryCnt || got.RNRRetry != want.RNRRetry || got.MinRNRTimer != want.MinRNRTimer || !got.GRH {
			t.Errorf("%s: %+v, want traffic_class 96, timeout 18, retry_cnt 5, rnr_retry 3, min_rnr_timer 10, a GRH", c.side, got)
		}
	}
	_, res, _ = point(t, "", serveArgs(t, "1MiB"), []string{"--block-size", "4KiB", "--total", "64KiB"})
	if p := res.RDMAPath; p.Timeout != 14 || p.RetryCnt != 7 || p.RNRRetry != 7 || p.MinRNRTimer != 12 || p.TrafficClass != 0 || p.RelaxedOrdering == nil || !*p.RelaxedOrdering || p.PathMTU < 1024 {
		t.Errorf("defaults: %+v, want timeout 14, retry_cnt 7, rnr_retry 7, min_rnr_timer 12, traffic_class 0, relaxed ordering, a path MTU", *p)
	}
	_, res, _ = point(t, "", serveArgs(t, "1MiB"), []string{"--block-size", "4KiB", "--total", "64KiB", "--relaxed-ordering=false"})
	if res.RelaxedOrdering == nil || *res.RelaxedOrdering {
		t.Errorf("--relaxed-ordering=false: relaxed_ordering %v", res.RelaxedOrdering)
	}
}

// TestCM connects through rdma_cm on rxe, two QPs, verified.
func TestCM(t *testing.T) {
	ready, res, done := point(t, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		serveArgs(t, "4MiB", "--rdma-connect", "cm", "--traffic-class", "32"),
		[]string{"--rdma-connect", "cm", "--block-size", "64KiB", "--queue-depth", "8", "--qps", "2", "--total", "8MiB", "--verify", "--traffic-class", "32"})
	if ready.Connect != "cm" || res.Connect != "cm" || res.Device != "rxe0" || !res.Verified || done.BytesServed != 8<<20 {
		t.Errorf("cm on rxe: server %+v, client %+v, verified %v, served %d", ready.RDMAPath, res.RDMAPath, res.Verified, done.BytesServed)
	}
	if res.MaxRdAtomic < 1 || res.TrafficClass != 32 {
		t.Errorf("cm QP: max_rd_atomic %d, traffic_class %d; want > 0 and 32", res.MaxRdAtomic, res.TrafficClass)
	}
}

// TestCMSiw reads over soft-iWARP, which rdma_cm alone can connect: on its
// own NIC, so rdma_cm cannot resolve the address to rxe.
func TestCMSiw(t *testing.T) {
	needSiw(t)
	ready, res, _ := point(t, "", serveArgs(t, "4MiB", "--listen", guestIP2, "--rdma-connect", "cm"),
		[]string{"--rdma-connect", "cm", "--block-size", "64KiB", "--queue-depth", "8", "--qps", "2", "--total", "8MiB", "--verify"})
	if ready.Device != "siw0" || res.Device != "siw0" || res.Connect != "cm" || !res.Verified {
		t.Errorf("cm on siw: server %+v, client %+v, verified %v; want siw0 on both", ready.RDMAPath, res.RDMAPath, res.Verified)
	}
	t.Logf("siw: %.1f MB/s, p50 %.0f µs", res.BandwidthMBs, res.LatP50Us)
}

// TestSiwNeedsCM: connect tcp on iWARP is refused before any read, on
// either side, with the hint to use cm.
func TestSiwNeedsCM(t *testing.T) {
	needSiw(t)
	msg, code := failureCode(t, start(t, "", serveArgs(t, "1MiB", "--listen", guestIP2)...))
	if code != results.ErrorCodeNeedsCM || !strings.Contains(msg, "siw0") || !strings.Contains(msg, "rdma.connect: cm") {
		t.Errorf("serve over siw with connect tcp: %q (code %q)", msg, code)
	}
	srv := start(t, "", serveArgs(t, "1MiB", "--accept-timeout", "5s")...)
	ready := until[results.Ready](t, srv, "ready")
	msg, code = failureCode(t, start(t, "", readArgs(guestIP, ready.Port, "--block-size", "4KiB", "--rdma-device", "siw0")...))
	if code != results.ErrorCodeNeedsCM || !strings.Contains(msg, "rdma.connect: cm") {
		t.Errorf("read on siw0 with connect tcp: %q (code %q)", msg, code)
	}
}

// TestDevicesKeepsGoing lists the devices as a user who may open rxe0's
// uverbs device but not rxe1's, so that opening rxe1 fails: node devices
// must still list rxe0 whole, and rxe1 with its error.
func TestDevicesKeepsGoing(t *testing.T) {
	uverbs := func(dev string) string {
		all, _ := os.ReadDir("/sys/class/infiniband_verbs")
		for _, e := range all {
			if b, err := os.ReadFile("/sys/class/infiniband_verbs/" + e.Name() + "/ibdev"); err == nil && strings.TrimSpace(string(b)) == dev {
				return "/dev/infiniband/" + e.Name()
			}
		}
		t.Fatalf("no uverbs device for %s", dev)
		return ""
	}
	for dev, mode := range map[string]os.FileMode{"rxe0": 0o666, "rxe1": 0o600} {
		p := uverbs(dev)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, st.Mode().Perm()) })
	}
	cmd := exec.Command(nodeBin(t), "devices", "--json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node devices as nobody: %v\n%s", err, out)
	}
	var l struct {
		Devices []rdma.Device `json:"devices"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatal(err)
	}
	var rxe0, rxe1 *rdma.Device
	for i, d := range l.Devices {
		switch d.Name {
		case "rxe0":
			rxe0 = &l.Devices[i]
		case "rxe1":
			rxe1 = &l.Devices[i]
		}
	}
	if rxe0 == nil || rxe0.Error != "" || len(rxe0.Ports) != 1 || rxe1 == nil || !strings.Contains(rxe1.Error, "ibv_open_device") {
		t.Fatalf("node devices with rxe1 unopenable: rxe0 %+v, rxe1 %+v; want rxe0 whole and rxe1 with its error", rxe0, rxe1)
	}
	t.Logf("rxe1: %s", rxe1.Error)
}
