//go:build rdma

package rdma

import (
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// Built reports whether this binary holds the real RDMA transport.
const Built = true

// Transport is the RDMA transport. The server side is in server.go, the
// client in client.go, the device handling in device.go.
type Transport struct{}

var _ transport.Transport = (*Transport)(nil)

// New returns the RDMA transport.
func New() *Transport { return &Transport{} }

// Name returns "rdma".
func (*Transport) Name() string { return results.TransportRDMA }
