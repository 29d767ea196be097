//go:build rdma

package rdma

// #include "shim.h"
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// watchPollMs is how long one wait for an async event lasts: how soon a
// watch ends after Stop.
const watchPollMs = 100

// eventWatch reads a device's async events while a role uses it, and
// hands the first event that breaks the path through its port and GID to
// onBreak (breakingEvent). Both roles watch: the server for its session,
// the client for its life.
type eventWatch struct {
	stop chan struct{}
	done chan struct{} // closed once it has stopped reading
}

// watchEvents starts watching d for a role whose QPs use gid.
func watchEvents(d *device, gid GID, onBreak func(error)) *eventWatch {
	w := &eventWatch{stop: make(chan struct{}), done: make(chan struct{})}
	var gone func() bool
	if gid.GID != "" {
		gone = func() bool { return d.gidGone(gid) }
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			var typ, port C.int
			switch C.rs_async_wait(d.ctx, watchPollMs, &typ, &port) {
			case -1:
				return // no async events to be had: nothing to watch
			case 1:
				if why := breakingEvent(int(typ), int(port), d.port, gid, gone); why != "" {
					onBreak(fmt.Errorf("%s reported %s during the point; hint: check the link and the interface's addresses (`node devices`, `ibv_devinfo`) and rerun the point", d.name, why))
					return
				}
			}
		}
	}()
	return w
}

// Stop ends the watch and waits for its last wait.
func (w *eventWatch) Stop() {
	if w == nil {
		return
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// eventGrace is how long a failed READ or session waits for an async
// event that would explain it: several of the watcher's polls
// (watchPollMs).
const eventGrace = time.Second

// await waits up to d for seen to report the watch handed over a
// path-breaking event, and returns at once when it has, or when the watch
// has ended without one (the device has no async events). The READs fail
// (flushed, retry exceeded) as soon as the path does, and the device's
// event can come a moment after them: this gives it that moment, so the
// error names it.
func (w *eventWatch) await(d time.Duration, seen func() bool) {
	if w == nil {
		return
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !seen() {
		select {
		case <-w.done:
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// gidGone reports whether gid is no longer at its index of d's port's
// GID table, re-queried now: removed, or the index holds another GID.
func (d *device) gidGone(gid GID) bool {
	var e C.struct_ibv_gid_entry
	if verbErr(C.rs_query_gid(d.ctx, C.uint8_t(d.port), C.int(gid.Index), &e), "") != nil {
		return true
	}
	var raw [16]byte
	copy(raw[:], C.GoBytes(unsafe.Pointer(&e.gid), 16))
	return newGID(int(e.gid_index), raw, int(e.gid_type), int(e.ndev_ifindex)).GID != gid.GID
}
