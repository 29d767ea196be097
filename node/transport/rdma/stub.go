//go:build !rdma

package rdma

import (
	"context"
	"net"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// Built reports whether this binary holds the real RDMA transport.
const Built = false

// Transport is the stand-in for a node built without RDMA: every call
// fails with ErrNotBuilt.
type Transport struct{}

var _ transport.Transport = (*Transport)(nil)

// New returns the stand-in transport.
func New() *Transport { return &Transport{} }

// Name returns "rdma".
func (*Transport) Name() string { return results.TransportRDMA }

// Listen fails with ErrNotBuilt.
func (*Transport) Listen(context.Context, transport.ServerConfig, func(string)) (transport.Server, error) {
	return nil, ErrNotBuilt
}

// Dial fails with ErrNotBuilt.
func (*Transport) Dial(context.Context, transport.ClientConfig) (transport.Client, error) {
	return nil, ErrNotBuilt
}

// Devices fails with ErrNotBuilt.
func Devices() ([]Device, error) { return nil, ErrNotBuilt }

// Choose fails with ErrNotBuilt.
func Choose(string, int, int, net.IP) (results.DeviceChoice, error) {
	return results.DeviceChoice{}, ErrNotBuilt
}
