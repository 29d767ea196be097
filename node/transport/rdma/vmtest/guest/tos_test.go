//go:build rdmaguest

package guest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// rdmaCMConfig is rdma_cm's configfs directory; configfs is mounted by the
// test when the guest has not.
const rdmaCMConfig = "/sys/kernel/config/rdma_cm"

// setDefaultRoCETOS sets rxe0 port 1's default_roce_tos in configfs, as
// a site administrator would for its lossless class, and puts it back.
func setDefaultRoCETOS(t *testing.T, tos string) {
	t.Helper()
	if _, err := os.Stat(rdmaCMConfig); err != nil {
		if err := unix.Mount("none", "/sys/kernel/config", "configfs", 0, ""); err != nil && err != unix.EBUSY {
			t.Fatalf("mount configfs: %v", err)
		}
	}
	dir := filepath.Join(rdmaCMConfig, "rxe0")
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		t.Fatalf("configfs for rxe0 (is rdma_cm built with CONFIG_INFINIBAND_ADDR_TRANS_CONFIGFS?): %v", err)
	}
	f := filepath.Join(dir, "ports", "1", "default_roce_tos")
	if err := os.WriteFile(f, []byte(tos), 0o644); err != nil {
		t.Fatalf("set %s: %v", f, err)
	}
	t.Cleanup(func() {
		os.WriteFile(f, []byte("0"), 0o644)
		os.Remove(dir)
	})
}

// TestDefaultRoCETOS: with connect cm and no traffic_class, node sets no
// ToS, so rdma_cm uses the administrator's default_roce_tos (96 here):
// the client's QP carries it (read back with ibv_query_qp) and both sides'
// paths record the configfs value. traffic_class 32 overrides it. (rxe
// hands a packet for its own address straight to its receive path, so a
// capture on one guest sees no RoCE packet; the QP's address vector is
// what the kernel puts in the packets' traffic class.)
func TestDefaultRoCETOS(t *testing.T) {
	setDefaultRoCETOS(t, "96")
	cm := []string{"--rdma-connect", "cm"}
	read := append([]string{"--block-size", "64KiB", "--queue-depth", "4", "--total", "1MiB", "--verify"}, cm...)
	ready, res, _ := point(t, "", serveArgs(t, "1MiB", cm...), read)
	for _, c := range []struct {
		side string
		tos  *int
	}{{"server", ready.DefaultRoCETOS}, {"client", res.DefaultRoCETOS}} {
		if c.tos == nil || *c.tos != 96 {
			t.Errorf("%s: default_roce_tos %v, want 96 recorded", c.side, c.tos)
		}
	}
	if res.TrafficClass != 96 || res.TrafficClassSet {
		t.Errorf("no traffic_class over cm: the QP carries %d (set %v), want 96, the port's default_roce_tos", res.TrafficClass, res.TrafficClassSet)
	}
	if res.GID != "::ffff:"+guestIP {
		t.Errorf("cm: recorded GID %q, want the one rdma_cm bound, ::ffff:%s", res.GID, guestIP)
	}

	tc := append([]string{"--traffic-class", "32"}, cm...)
	_, res, _ = point(t, "", serveArgs(t, "1MiB", tc...), append(read, "--traffic-class", "32"))
	if res.TrafficClass != 32 || !res.TrafficClassSet {
		t.Errorf("traffic_class 32 over cm: the QP carries %d (set %v), want 32", res.TrafficClass, res.TrafficClassSet)
	}

	// Over tcp-connect an unset traffic class leaves the GRH at 0.
	_, res, _ = point(t, "", serveArgs(t, "1MiB"), []string{"--block-size", "64KiB", "--total", "1MiB"})
	if res.TrafficClass != 0 || res.TrafficClassSet || res.DefaultRoCETOS != nil {
		t.Errorf("tcp-connect, no traffic_class: %d (set %v, default_roce_tos %v), want 0 and no configfs value", res.TrafficClass, res.TrafficClassSet, res.DefaultRoCETOS)
	}
}
