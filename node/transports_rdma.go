//go:build rdma

package main

import (
	"rdmasweep/node/transport/rdma"
	"rdmasweep/results"
)

// With the rdma tag this node carries the verbs transport (statically
// linked with every rdma-core provider; see make node-rdma).
func init() { transports[results.TransportRDMA] = rdma.New() }
