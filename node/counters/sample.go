package counters

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"rdmasweep/node/rdmanl"
	"rdmasweep/results"
)

// TCPPhase is a TCP data connection's own TCP_INFO over a phase: the
// segments it retransmitted and its smoothed round trip at the end.
type TCPPhase struct {
	Retrans int64
	RTT     time.Duration
	// DSACKDups are the retransmits the peer reported as duplicates
	// (tcpi_dsack_dups): spurious ones.
	DSACKDups int64
}

// Sample is one role's counters, each group read when the role's phase
// for it begins (Disk, Port, Netdev), and all read again at its end
// (End). What cannot be read is noted in the event's unread, never fatal:
// the run goes on without that group.
type Sample struct {
	sysfs  string
	groups []group             // begun, in the order they began
	before map[string]Snapshot // by group name
	unread map[string]string
	disk   *BlockDevice // Disk's, for DiskMark
}

// group is one set of counters a Sample reads when its phase begins and
// again at the end, as node_exporter's collectors each read one source:
// one file each (disk.go, rdma.go, netdev.go).
type group interface {
	// name prefixes the group's raw counters ("disk/…") and keys unread.
	name() string
	// read reads the counters now.
	read() (Snapshot, error)
	// fill puts the group's headlines from its delta into c.
	fill(c *results.Counters, d Delta)
}

// NewSample starts an empty sample; sysfs is the /sys mount ("" is /sys).
func NewSample(sysfs string) *Sample {
	if sysfs == "" {
		sysfs = "/sys"
	}
	return &Sample{sysfs: sysfs, before: map[string]Snapshot{}, unread: map[string]string{}}
}

// begin reads g's counters for the first time; what cannot be read is
// noted in unread and the group left out.
func (s *Sample) begin(g group) {
	snap, err := g.read()
	if err != nil {
		s.unread[g.name()] = err.Error()
		return
	}
	s.groups = append(s.groups, g)
	s.before[g.name()] = snap
}

// End reads the counters again and returns the deltas since Begin, their
// headlines, and node's own faults over its life. tcp is the data
// connection's own figures over the phase, nil for a transport whose data
// does not cross one.
func (s *Sample) End(tcp *TCPPhase) *results.Counters {
	c := &results.Counters{Raw: map[string]int64{}, Unread: s.unread, BootID: bootID()}
	for _, g := range s.groups {
		after, err := g.read()
		if err != nil {
			s.unread[g.name()] = err.Error()
			continue
		}
		d := Sub(s.before[g.name()], after)
		for name, v := range d {
			c.Raw[g.name()+"/"+name] = v
		}
		g.fill(c, d)
	}
	if p, err := Process(); err != nil {
		s.unread["process"] = err.Error()
	} else {
		for name, v := range p {
			c.Raw["process/"+name] = int64(v)
		}
		c.MajorFaults, c.MinorFaults = ptr(int64(p["major_faults"])), ptr(int64(p["minor_faults"]))
	}
	if tcp != nil {
		c.TCPRetrans = ptr(tcp.Retrans)
		rtt := float64(tcp.RTT) / float64(time.Microsecond)
		c.TCPRTTUs = &rtt
		c.Raw["tcp/total_retrans"] = tcp.Retrans
		c.Raw["tcp/dsack_dups"] = tcp.DSACKDups
	}
	if len(c.Unread) == 0 {
		c.Unread = nil
	}
	return c
}

func ptr(v int64) *int64 { return &v }

// sum2 adds the named counters of d; nil when d has neither.
func sum2(d Delta, names ...string) *int64 {
	var total int64
	found := false
	for _, n := range names {
		if v, ok := d[n]; ok {
			total, found = total+v, true
		}
	}
	if !found {
		return nil
	}
	return &total
}

// portNetdevNL asks RDMA netlink for a port's network device (rdmanl);
// a test replaces it.
var portNetdevNL = rdmanl.PortNetdev

// PortNetdev is the network device under an RDMA port (RoCE, iWARP): the
// netdev its GIDs belong to, from the port's gid_attrs/ndevs, else, on
// the host's own /sys, the one the kernel gives over RDMA netlink (siw's
// GIDs name none). An InfiniBand port has none.
func PortNetdev(sysfs, dev string, port int) (string, error) {
	if sysfs == "" {
		sysfs = "/sys"
	}
	nd, err := gidNetdev(sysfs, dev, port)
	if err != nil && sysfs == "/sys" {
		n, nlErr := portNetdevNL(dev, port)
		if nlErr == nil {
			return n, nil
		}
		err = fmt.Errorf("%w; %w", err, nlErr)
	}
	return nd, err
}

// gidNetdev is the first netdev among the port's gid_attrs/ndevs, by
// GID index.
func gidNetdev(sysfs, dev string, port int) (string, error) {
	dir := filepath.Join(sysfs, "class", "infiniband", dev, "ports", fmt.Sprint(port), "gid_attrs", "ndevs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("find the network device of %s port %d: %w", dev, port, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Slice(names, func(i, j int) bool {
		return len(names[i]) < len(names[j]) || len(names[i]) == len(names[j]) && names[i] < names[j]
	})
	for _, n := range names {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
			if nd := strings.TrimSpace(string(b)); nd != "" {
				return nd, nil
			}
		}
	}
	return "", fmt.Errorf("%s port %d has no network device (InfiniBand?)", dev, port)
}

// bootID identifies this boot of the host, "" where it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
