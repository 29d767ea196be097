package counters

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleEvent reads a faked rxe port and its netdev around a phase in
// which the counters move, and checks the event's headlines and raw
// deltas: the family's mapping, drops from the netdev, TCP from the
// transport, the process's own faults, and a group that cannot be read
// named in unread rather than given as 0.
func TestSampleEvent(t *testing.T) {
	port := "class/infiniband/rxe0/ports/1/"
	root := fakeSysfs(t, map[string]string{
		port + "hw_counters/duplicate_request":   "10\n",
		port + "hw_counters/completer_retry_err": "0\n",
		port + "counters/port_xmit_data":         "100\n",
		port + "gid_attrs/ndevs/0":               "eth1\n",
		port + "gid_attrs/ndevs/1":               "eth1\n",
		"class/net/eth1/statistics/rx_dropped":   "5\n",
		"class/net/eth1/statistics/tx_dropped":   "0\n",
		"class/net/eth1/statistics/rx_bytes":     "100\n",
	})
	nd, err := PortNetdev(root, "rxe0", 1)
	if err != nil || nd != "eth1" {
		t.Fatalf("PortNetdev = %q, %v; want eth1", nd, err)
	}
	s := NewSample(root)
	s.Port("rxe0", 1)
	s.Netdev(nd, "")
	s.Disk(context.Background(), filepath.Join(root, "no-such-file"))
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(port+"hw_counters/duplicate_request", "714\n")
	write("class/net/eth1/statistics/tx_dropped", "3\n")
	write("class/net/eth1/statistics/rx_bytes", "1100\n")
	c := s.End(&TCPPhase{Retrans: 0})
	if c.RDMAFamily != "rxe" || c.RDMARetransEvents == nil || *c.RDMARetransEvents != 704 || c.RDMACNP != nil {
		t.Errorf("rdma: family %q, retrans %v, cnp %v; want rxe, 704, empty", c.RDMAFamily, c.RDMARetransEvents, c.RDMACNP)
	}
	if c.NetDrops == nil || *c.NetDrops != 3 || c.Raw["netdev/rx_bytes"] != 1000 {
		t.Errorf("netdev: drops %v, rx_bytes %d; want 3 and 1000", c.NetDrops, c.Raw["netdev/rx_bytes"])
	}
	if c.Raw["rdma/hw_counters/duplicate_request"] != 704 {
		t.Errorf("raw = %v", c.Raw)
	}
	// port_xmit_data counts 4-byte words; the event says so, and names no
	// unit for a counter that counts what its name says.
	if got := c.Units["rdma/counters/port_xmit_data"]; got != "4-byte words" || len(c.Units) != 1 {
		t.Errorf("units = %v, want port_xmit_data in 4-byte words alone", c.Units)
	}
	if c.TCPRetrans == nil || *c.TCPRetrans != 0 {
		t.Errorf("tcp_retrans %v, want 0 (the connection's own, read)", c.TCPRetrans)
	}
	if c.MinorFaults == nil || *c.MinorFaults <= 0 {
		t.Errorf("minor faults %v over the test process's life", c.MinorFaults)
	}
	if c.DiskReadBytes != nil || c.Unread["disk"] == "" {
		t.Errorf("disk: %v read, unread %q; want empty and a reason", c.DiskReadBytes, c.Unread["disk"])
	}

	none := NewSample(root)
	none.Netdev("", "listening on all addresses")
	if c := none.End(nil); c.NetDrops != nil || c.TCPRetrans != nil || c.Unread["netdev"] != "listening on all addresses" {
		t.Errorf("no netdev, no TCP: drops %v, tcp %v, unread %v", c.NetDrops, c.TCPRetrans, c.Unread)
	}
	if _, err := PortNetdev(root, "mlx5_0", 1); err == nil {
		t.Error("a port with no gid_attrs gave a netdev")
	}
}

// TestPortNetdevOverNetlink: a port whose GIDs name no netdev (siw's)
// gets the one the kernel gives over RDMA netlink, on the host's own
// /sys; a faked sysfs is never mixed with the host's kernel.
func TestPortNetdevOverNetlink(t *testing.T) {
	saved := portNetdevNL
	t.Cleanup(func() { portNetdevNL = saved })
	portNetdevNL = func(dev string, port int) (string, error) {
		if dev == "siw-test0" && port == 1 {
			return "eth2", nil
		}
		return "", errors.New("rdma netlink lists no device " + dev)
	}
	if nd, err := PortNetdev("/sys", "siw-test0", 1); err != nil || nd != "eth2" {
		t.Errorf("PortNetdev(siw-test0) = %q, %v; want eth2 from netlink", nd, err)
	}
	if nd, err := PortNetdev("/sys", "siw-test1", 1); err == nil || !strings.Contains(err.Error(), "no device siw-test1") {
		t.Errorf("PortNetdev(siw-test1) = %q, %v; want an error with netlink's reason", nd, err)
	}
	if nd, err := PortNetdev(t.TempDir(), "siw-test0", 1); err == nil {
		t.Errorf("PortNetdev under a faked sysfs asked the host's netlink: %q", nd)
	}
}
