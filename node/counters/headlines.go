package counters

import (
	"os"
	"path/filepath"
	"strings"

	"rdmasweep/node/rdmanl"
)

// Headlines are the few portable figures a row carries, summed from a
// device family's own counters by the mapping below. A headline is nil
// where the device has none of its counters: an empty cell, never a 0
// that would read as "nothing happened".
type Headlines struct {
	RetransEvents *int64 // retransmits, sequence errors and duplicates, at either end
	CNP           *int64 // congestion notification packets sent
	ECNMarked     *int64 // RoCE packets that arrived ECN-marked
}

// mapping is, for each device family, which of its counters (port
// hw_counters/ names, as the kernel names them) make each headline. The
// sources are the drivers' own counter tables:
//   - rxe: drivers/infiniband/sw/rxe/rxe_hw_counters.c. Measured across a
//     two-guest wire with 1 % loss: the reading side's completer_retry_err
//     and the serving side's duplicate_request moved, out_of_seq_request
//     did not (docs/telemetry.md).
//   - mlx5: drivers/infiniband/hw/mlx5/counters.c (the q-counters
//     out_of_sequence, duplicate_request, packet_seq_err,
//     implied_nak_seq_err, local_ack_timeout_err; the congestion counters
//     np_cnp_sent and np_ecn_marked_roce_packets).
//   - irdma: drivers/infiniband/hw/irdma/verbs.c, irdma_hw_stat_names
//     (tcpRetransSegs, renamed RetransSegs in later kernels: its TCP
//     engine's, so iWARP only, and in RoCE mode it stays 0 whatever
//     happens, so the headline is left empty there; cnpSent; RxECNMrkd).
//   - siw has no hw_counters: its retransmits are its kernel TCP socket's,
//     counted only host-wide (TcpRetransSegs in /proc/net/snmp).
var mapping = map[string]struct {
	retrans, cnp, ecn []string
	retransIWARPOnly  bool // the retransmit counters count iWARP's TCP alone
}{
	"rxe": {
		retrans: []string{"completer_retry_err", "duplicate_request", "out_of_seq_request", "rcvd_seq_err"},
	},
	"mlx5": {
		retrans: []string{"out_of_sequence", "duplicate_request", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err"},
		cnp:     []string{"np_cnp_sent"},
		ecn:     []string{"np_ecn_marked_roce_packets"},
	},
	"irdma": {
		retrans:          []string{"tcpRetransSegs", "RetransSegs"},
		cnp:              []string{"cnpSent"},
		ecn:              []string{"RxECNMrkd"},
		retransIWARPOnly: true,
	},
	"siw": {},
}

// Families are the device families the mapping knows, sorted.
func Families() []string { return []string{"irdma", "mlx5", "rxe", "siw"} }

// Headline sums family's counters in d (an RDMAPort delta) into the
// headlines; iwarp says the port runs iWARP (node_type RNIC), not RoCE or
// InfiniBand. An unknown family gives none.
func Headline(family string, iwarp bool, d Delta) Headlines {
	m := mapping[family]
	h := Headlines{
		RetransEvents: sum(d, m.retrans),
		CNP:           sum(d, m.cnp),
		ECNMarked:     sum(d, m.ecn),
	}
	if m.retransIWARPOnly && !iwarp {
		h.RetransEvents = nil
	}
	return h
}

// sum adds the named hw_counters in d; nil when d holds none of them.
func sum(d Delta, names []string) *int64 {
	var total int64
	found := false
	for _, n := range names {
		for _, key := range []string{"hw_counters/" + n, "device/hw_counters/" + n} {
			if v, ok := d[key]; ok {
				total += v
				found = true
			}
		}
	}
	if !found {
		return nil
	}
	return &total
}

// Add sums two roles' headlines: a headline is nil only where both are.
func Add(a, b Headlines) Headlines {
	plus := func(x, y *int64) *int64 {
		switch {
		case x == nil:
			return y
		case y == nil:
			return x
		}
		s := *x + *y
		return &s
	}
	return Headlines{plus(a.RetransEvents, b.RetransEvents), plus(a.CNP, b.CNP), plus(a.ECNMarked, b.ECNMarked)}
}

// driverID asks the kernel for a device's uverbs driver id (rdmanl); a
// test replaces it.
var driverID = rdmanl.UverbsDriverID

// Family names dev's device family as rdma-core names its provider: from
// the device's uverbs driver id, which the kernel gives over RDMA netlink.
// A device the kernel does not know by id (or a faked sysfs, at a root
// other than /sys) falls back to its PCI function's driver (mlx5_core
// gives mlx5), then to the prefix of its name (rxe0, siw0). The driver id
// comes first because a PCI function's driver need not be the RDMA one:
// irdma's device hangs off a function that ice or i40e drives.
func Family(sysfs, dev string) string {
	if sysfs == "/sys" {
		if id, err := driverID(dev); err == nil {
			if f := rdmanl.Family(id); f != "" {
				return f
			}
		}
	}
	if target, err := os.Readlink(filepath.Join(sysfs, "class", "infiniband", dev, "device", "driver")); err == nil {
		drv := filepath.Base(target)
		return strings.TrimSuffix(drv, "_core")
	}
	for _, f := range Families() {
		if strings.HasPrefix(dev, f) {
			return f
		}
	}
	return ""
}

// IWARP reports whether dev is an iWARP device: sysfs's node_type says
// "4: RNIC" (RoCE and InfiniBand devices are "1: CA").
func IWARP(sysfs, dev string) bool {
	b, err := os.ReadFile(filepath.Join(sysfs, "class", "infiniband", dev, "node_type"))
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), "4:")
}
