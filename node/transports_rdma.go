//go:build rdma

package main

import "rdmasweep/node/transport/rdma"

// With the rdma tag this node carries the verbs transport (statically
// linked with every rdma-core provider; see make node-rdma).
func init() { transports["rdma"] = rdma.New() }
