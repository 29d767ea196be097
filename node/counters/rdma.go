package counters

import "rdmasweep/results"

// Port begins counting an RDMA port's counters and hw_counters.
func (s *Sample) Port(dev string, port int) {
	s.begin(rdmaGroup{sysfs: s.sysfs, dev: dev, port: port})
}

// rdmaGroup is an RDMA port's counters/ and hw_counters/, with the
// headlines of its vendor family (headlines.go).
type rdmaGroup struct {
	sysfs, dev string
	port       int
}

func (g rdmaGroup) name() string            { return results.TransportRDMA }
func (g rdmaGroup) read() (Snapshot, error) { return RDMAPort(g.sysfs, g.dev, g.port) }

// wordCounters are the port counters the InfiniBand spec counts in 4-byte
// words, which the kernel's sysfs passes on unscaled.
var wordCounters = []string{"counters/port_xmit_data", "counters/port_rcv_data"}

func (g rdmaGroup) fill(c *results.Counters, d Delta) {
	for _, name := range wordCounters {
		if _, ok := d[name]; ok {
			if c.Units == nil {
				c.Units = map[string]string{}
			}
			c.Units[g.name()+"/"+name] = "4-byte words"
		}
	}
	c.RDMADevice, c.RDMAPort = g.dev, g.port
	c.RDMAFamily = Family(g.sysfs, g.dev)
	h := Headline(c.RDMAFamily, IWARP(g.sysfs, g.dev), d)
	c.RDMARetransEvents, c.RDMACNP, c.RDMAECNMarked = h.RetransEvents, h.CNP, h.ECNMarked
}
