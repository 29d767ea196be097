//go:build rdma

package rdma

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A window takes the client's releases in order, once each, and admits
// populate's readers no further than one window beyond the regions
// deregistered: region 2·size waits for the first drop. A window as large
// as the file bounds nothing and is none.
func TestWindow(t *testing.T) {
	if newWindow(4, 4, 8) != nil || newWindow(0, 32, 0) != nil {
		t.Fatal("a window of 0, or of every region, is not nil")
	}
	w := newWindow(2, 8, 4)
	if err := w.release(1); !errors.Is(err, errProtocol) {
		t.Errorf("release of region 2 first: %v; want a protocol error", err)
	}
	if err := w.release(0); err != nil {
		t.Fatal(err)
	}
	if err := w.release(0); !errors.Is(err, errProtocol) {
		t.Errorf("region 1 released twice: %v; want a protocol error", err)
	}
	if i := <-w.released; i != 0 {
		t.Fatalf("released %d, want 0", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := w.admit(ctx, 3); err != nil {
		t.Fatalf("region 4 of a window of 2 with none dropped: %v; want it admitted", err)
	}
	admitted := make(chan error, 1)
	go func() { admitted <- w.admit(ctx, 4) }()
	select {
	case err := <-admitted:
		t.Fatalf("region 5 admitted (%v) before any region was dropped", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.droppedOne()
	if err := <-admitted; err != nil {
		t.Fatalf("region 5 after a drop: %v; want it admitted", err)
	}
}
