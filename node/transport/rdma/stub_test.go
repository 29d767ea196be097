//go:build !rdma

package rdma

import (
	"context"
	"errors"
	"testing"

	"rdmasweep/node/transport"
)

// A node built without rdma must say so, in the words that tell a person
// how to get it, from every entry point.
func TestStubSaysNotBuilt(t *testing.T) {
	const want = "rdma: not built into this node binary (build with: make node-rdma)"
	if ErrNotBuilt.Error() != want {
		t.Errorf("ErrNotBuilt = %q, want %q", ErrNotBuilt, want)
	}
	tr := New()
	if _, err := tr.Listen(context.Background(), transport.ServerConfig{}, nil); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Listen: %v", err)
	}
	if _, err := tr.Dial(context.Background(), transport.ClientConfig{}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Dial: %v", err)
	}
	if _, err := Devices(); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Devices: %v", err)
	}
	if Built || tr.Name() != "rdma" {
		t.Errorf("stub: Built %v, Name %q", Built, tr.Name())
	}
}
