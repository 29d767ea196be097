package counters

import "rdmasweep/results"

// Netdev begins counting a network device's statistics; with name ""
// why says why the data's device is not known.
func (s *Sample) Netdev(name, why string) {
	if name == "" {
		s.unread["netdev"] = why
		return
	}
	s.begin(netdevGroup{sysfs: s.sysfs, dev: name})
}

// netdevGroup is a network device's statistics/.
type netdevGroup struct{ sysfs, dev string }

func (g netdevGroup) name() string            { return "netdev" }
func (g netdevGroup) read() (Snapshot, error) { return Netdev(g.sysfs, g.dev) }

func (g netdevGroup) fill(c *results.Counters, d Delta) {
	c.Netdev = g.dev
	c.NetDrops = sum2(d, "rx_dropped", "tx_dropped")
}
