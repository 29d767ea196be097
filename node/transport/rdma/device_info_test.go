package rdma

import (
	"errors"
	"net"
	"strings"
	"testing"

	"rdmasweep/node/transport"
)

// rxe is a RoCE device with one port whose GIDs hold ip on netdev.
func rxe(name, ip, netdev string) devCandidate {
	return devCandidate{Device: Device{Name: name, Transport: "InfiniBand", Ports: []Port{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet",
		GIDs: []GID{{Index: 0, GID: "fe80::1", Type: "RoCE v2", Netdev: netdev}, {Index: 1, GID: "::ffff:" + ip, Type: "RoCE v2", Netdev: netdev}}}}}}
}

func ib(name, sysDevice string, ports ...string) devCandidate {
	c := devCandidate{Device: Device{Name: name, Transport: "InfiniBand"}, sysDevice: sysDevice}
	for i, st := range ports {
		c.Ports = append(c.Ports, Port{Port: i + 1, State: st, LinkLayer: "InfiniBand", GIDs: []GID{{Index: 0, GID: "fe80::a", Type: "IB"}}})
	}
	return c
}

func TestChooseDevice(t *testing.T) {
	siw := devCandidate{Device: Device{Name: "siw0", Transport: "iWARP", Ports: []Port{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet",
		GIDs: []GID{{Index: 0, GID: "5254:12:3458::", Type: "IB"}}}}}}
	two := []devCandidate{rxe("rxe0", "10.0.2.15", "eth0"), rxe("rxe1", "10.0.3.15", "eth1"), siw}
	broken := devCandidate{Device: Device{Name: "mlx5_9", Error: "cannot open: ibv_open_device: permission denied"}}
	efa := devCandidate{Device: Device{Name: "efa_0", Transport: "unspecified", Driver: "efa", Unsupported: unsupportedReason("unspecified", "efa")}}
	for _, c := range []struct {
		name    string
		cands   []devCandidate
		dev     string
		port    int
		addr    string
		own     *netOwner
		want    string
		wantErr string
	}{
		{name: "second NIC by its GID", cands: two, addr: "10.0.3.15", own: &netOwner{ifname: "eth1"}, want: "rxe1"},
		{name: "first NIC", cands: two, addr: "10.0.2.15", own: &netOwner{ifname: "eth0"}, want: "rxe0"},
		{name: "iWARP by the MAC in its GID", cands: two, addr: "10.0.4.15", own: &netOwner{ifname: "eth2", mac: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x58}}, want: "siw0"},
		{name: "named beats the address", cands: two, dev: "rxe0", addr: "10.0.3.15", want: "rxe0"},
		{name: "named, missing", cands: two, dev: "mlx5_0", wantErr: `no RDMA device named "mlx5_0" (found: rxe0, rxe1, siw0)`},
		{name: "named, broken", cands: append(two, broken), dev: "mlx5_9", wantErr: "mlx5_9: cannot open"},
		{name: "named, EFA", cands: []devCandidate{efa}, dev: "efa_0", wantErr: "SRD, not reliable-connected"},
		{name: "address on no device", cands: two, addr: "192.168.1.5", own: &netOwner{ifname: "eno1"},
			wantErr: "no RDMA device holds address 192.168.1.5 (found: rxe0 port 1 ACTIVE Ethernet 10.0.2.15 on eth0, rxe1 port 1 ACTIVE Ethernet 10.0.3.15 on eth1, siw0 port 1 ACTIVE Ethernet)"},
		{name: "one device, address elsewhere", cands: []devCandidate{rxe("rxe0", "10.0.2.15", "eth0")}, addr: "192.168.1.5", want: "rxe0"},
		{name: "IPoIB by PCI function", cands: []devCandidate{ib("mlx5_0", "/sys/devices/pci0000:00/0000:00:03.0", "ACTIVE"), ib("mlx5_1", "/sys/devices/pci0000:00/0000:00:04.0", "ACTIVE")},
			addr: "192.168.7.1", own: &netOwner{ifname: "ib1", sysDevice: "/sys/devices/pci0000:00/0000:00:04.0"}, want: "mlx5_1"},
		{name: "only active IB port, management address", cands: []devCandidate{rxe("rxe0", "10.9.9.9", "eth9"), ib("mlx5_0", "", "DOWN", "ACTIVE"), broken},
			addr: "192.168.1.5", own: &netOwner{ifname: "eno1"}, want: "mlx5_0", port: 2},
		{name: "several active IB ports", cands: []devCandidate{ib("mlx5_0", "", "ACTIVE"), ib("mlx5_1", "", "ACTIVE")}, addr: "192.168.1.5",
			wantErr: "several InfiniBand ports are active (mlx5_0 port 1, mlx5_1 port 1); hint: name the device"},
		{name: "nothing active", cands: []devCandidate{ib("mlx5_0", "", "DOWN"), efa}, addr: "192.168.1.5",
			wantErr: "no RDMA device is ACTIVE (found: mlx5_0 port 1 DOWN InfiniBand, efa_0 (unsupported: EFA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var addr net.IP
			if c.addr != "" {
				addr = net.ParseIP(c.addr)
			}
			i, port, err := chooseDevice(c.cands, c.dev, 0, addr, c.own)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("chooseDevice = %d, %v; want an error with %q", i, err, c.wantErr)
				}
				return
			}
			if err != nil || c.cands[i].Name != c.want || (c.port != 0 && port != c.port) {
				t.Fatalf("chooseDevice = %d port %d, %v; want %s", i, port, err, c.want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	if got := qpName(1, 4, 0x11); got != "QP 2 of 4 (qp_num 17)" {
		t.Errorf("qpName = %q", got)
	}
	g := GID{Index: 1, GID: "::ffff:10.0.2.15", Type: "RoCE v2"}
	rnr := wcMessage("QP 1 of 1 (qp_num 17)", "RNR retry counter exceeded", wcRNRRetryExceeded, 0, g, true)
	if strings.Contains(rnr, "odp") || !strings.Contains(rnr, "QP 1 of 1 (qp_num 17)") || !strings.Contains(rnr, "rnr_retry") {
		t.Errorf("RNR message %q: must not blame odp (an ODP fault pauses the QP: ack timeouts, not RNR)", rnr)
	}
	retry := wcMessage("QP 1 of 1 (qp_num 17)", "transport retry counter exceeded", wcRetryExceeded, 0, g, true)
	if !strings.Contains(retry, "odp") || !strings.Contains(retry, "timeout") {
		t.Errorf("retry-exceeded message on an odp region %q: want the odp page-fault hint", retry)
	}
	if m := wcMessage("QP 1 of 1 (qp_num 17)", "transport retry counter exceeded", wcRetryExceeded, 0, g, false); strings.Contains(m, "odp") {
		t.Errorf("retry-exceeded without odp names odp: %q", m)
	}
}

func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		transport, driver string
		refused           bool
	}{{"unspecified", "efa", true}, {"InfiniBand", "efa", true}, {"usNIC UDP", "usnic_verbs", true}, {"InfiniBand", "mlx5_core", false}, {"iWARP", "", false}} {
		if got := unsupportedReason(c.transport, c.driver); (got != "") != c.refused {
			t.Errorf("unsupportedReason(%q, %q) = %q, refused %v", c.transport, c.driver, got, c.refused)
		}
	}
	if !needsCM("iWARP") || needsCM("InfiniBand") {
		t.Error("needsCM: iWARP needs rdma_cm, InfiniBand/RoCE does not")
	}
	if !needGRH(true, false) || !needGRH(false, true) || needGRH(false, false) {
		t.Error("needGRH: RoCE always, InfiniBand only with gid_index given")
	}
}

func TestPinnable(t *testing.T) {
	const avail = 1748000 * 1024
	err := pinnable(8<<30, avail, "registering the region")
	if !errors.Is(err, transport.ErrMemAvailable) || !strings.Contains(err.Error(), "8GiB") || !strings.Contains(err.Error(), "1.7GiB") {
		t.Errorf("pinnable(8 GiB, %d) = %v; want ErrMemAvailable naming both", avail, err)
	}
	if err := pinnable(1<<30, avail, "x"); err != nil {
		t.Errorf("pinnable(1 GiB) = %v", err)
	}
	if gidTableSize([]int{256, 16}) != 272 {
		t.Error("gidTableSize: the GID table holds every port's entries")
	}
}
