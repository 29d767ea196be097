package main

import (
	"fmt"
	"sort"
	"strings"

	"rdmasweep/node/transport"
	"rdmasweep/node/transport/tcp"
	"rdmasweep/results"
)

// transports holds the transports built into this node. transports_rdma.go
// (built with the rdma tag) adds "rdma" in its init.
var transports = map[string]transport.Transport{results.TransportTCP: tcp.New()}

func lookupTransport(name string) (transport.Transport, error) {
	if tr, ok := transports[name]; ok {
		return tr, nil
	}
	var have []string
	for n := range transports {
		have = append(have, n)
	}
	sort.Strings(have)
	if name == results.TransportRDMA {
		return nil, fmt.Errorf("transport rdma is not built into this node (it has %s)", strings.Join(have, ", "))
	}
	return nil, usagef("unknown transport %q (this node has %s)", name, strings.Join(have, ", "))
}
