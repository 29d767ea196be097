//go:build rdma

package rdma

// connect cm: the QPs are connected by the RDMA connection manager instead
// of hand-built transitions, as iWARP devices require. Authentication is
// still the TCP challenge of exchange.go; rdma_cm connects only QPs whose
// request carries the session's token, sent in the welcome.

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"rdmasweep/node/transport"
)

// cmStep bounds one rdma_cm step (address or route resolution, connect).
const cmStep = 10 * time.Second

// registerProviders makes a static node's providers known to libibverbs
// before librdmacm first lists devices: librdmacm calls the plain
// ibv_get_device_list, which in a static binary sees no provider unless
// one of ours ran first.
func registerProviders() {
	var n C.int
	if list := C.rs_device_list(&n); list != nil {
		C.ibv_free_device_list(list)
	}
}

func cmEventName(e int) string {
	if e < 0 {
		return "no event"
	}
	return C.GoString(C.rdma_event_str(C.enum_rdma_cm_event_type(e)))
}

// waitCM waits for the next event on ch for up to d, honouring ctx.
func waitCM(ctx context.Context, ch *C.struct_rdma_event_channel, d time.Duration) (C.rs_cm_event, error) {
	deadline := time.Now().Add(d)
	for {
		var ev C.rs_cm_event
		if err := verbErr(C.rs_cm_wait(ch, 100, &ev), ""); err != nil {
			return ev, err
		}
		if ev.event >= 0 {
			return ev, nil
		}
		if err := ctx.Err(); err != nil {
			return ev, err
		}
		if time.Now().After(deadline) {
			return ev, fmt.Errorf("no rdma_cm event within %s", d)
		}
	}
}

// expect waits for event want on id, failing on any other event for it.
func expect(ctx context.Context, ch *C.struct_rdma_event_channel, id *C.struct_rdma_cm_id, want C.enum_rdma_cm_event_type, what, hint string) error {
	ev, err := waitCM(ctx, ch, cmStep)
	if err != nil {
		return fmt.Errorf("%s: %w; hint: %s", what, err, hint)
	}
	if ev.id != id || ev.event != C.int(want) || ev.status != 0 {
		msg := fmt.Sprintf("%s: rdma_cm reported %s (status %d), want %s", what, cmEventName(int(ev.event)), int(ev.status), cmEventName(int(want)))
		if ev.status < 0 {
			msg += fmt.Sprintf(" (%v)", syscall.Errno(-int(ev.status)))
		}
		return fmt.Errorf("%s; hint: %s", msg, hint)
	}
	return nil
}

// cmListener is the server's rdma_cm listener, bound to the listen
// address: binding resolves the device that holds it.
//
// Its one event channel serves every session at once (node serve
// --clients N): whichever session's accept holds mu reads the next event
// and hands it to the session it belongs to, by the token of a connect
// request or by the id of an established or broken QP, so no session
// rejects or fails on another's events.
type cmListener struct {
	ch     *C.struct_rdma_event_channel
	id     *C.struct_rdma_cm_id
	port   int
	dev    *device
	fabric transport.Fabric

	mu       sync.Mutex
	sessions map[*cmServerSession]bool // open sessions, under mu
}

// cmListen binds an rdma_cm listener to ip on a free port and returns it
// with the device rdma_cm found for ip (its context borrowed from
// rdma_cm), checked against the device and port the plan names, if any.
func cmListen(ip net.IP, name string, port int, f transport.Fabric) (*cmListener, *device, error) {
	registerProviders()
	l := &cmListener{fabric: f, sessions: map[*cmServerSession]bool{}}
	if err := verbErr(C.rs_cm_channel(&l.ch), "is the rdma_ucm module loaded?"); err != nil {
		return nil, nil, err
	}
	if err := verbErr(C.rs_cm_create_id(l.ch, &l.id), ""); err != nil {
		l.close()
		return nil, nil, err
	}
	cip := C.CString(ip.String())
	defer C.free(unsafe.Pointer(cip))
	var bound C.int
	if err := verbErr(C.rs_cm_listen(l.id, cip, 0, &bound), fmt.Sprintf("is %s the address of an RDMA interface (`node devices`)?", ip)); err != nil {
		l.close()
		return nil, nil, fmt.Errorf("rdma_cm listen on %s: %w", ip, err)
	}
	l.port = int(bound)
	ctx := C.rs_cm_verbs(l.id)
	if ctx == nil {
		l.close()
		return nil, nil, fmt.Errorf("rdma_cm bound %s but found no RDMA device holding it; hint: give the RDMA interface that address, or use connect tcp", ip)
	}
	dn := C.GoString(C.ibv_get_device_name(ctx.device))
	p := int(C.rs_cm_port(l.id))
	if err := checkCMDevice(dn, p, name, port, ip); err != nil {
		l.close()
		return nil, nil, err
	}
	d, err := useContext(ctx, dn, p, transportName(int(ctx.device.transport_type)))
	if err != nil {
		l.close()
		return nil, nil, err
	}
	d.borrowed = true
	l.dev = d
	return l, d, nil
}

// checkCMDevice refuses a device rdma_cm chose when the plan named another.
func checkCMDevice(dn string, p int, name string, port int, ip net.IP) error {
	if name != "" && dn != name {
		return fmt.Errorf("rdma_cm resolves %s to device %s, but rdma.device names %s; hint: use an address of %s, or leave the device out with connect cm", ip, dn, name, name)
	}
	if port > 0 && p != port {
		return fmt.Errorf("rdma_cm resolves %s to %s port %d, but rdma.ib_port is %d", ip, dn, p, port)
	}
	return nil
}

func (l *cmListener) close() {
	if l.id != nil {
		C.rs_cm_destroy(l.id)
		l.id = nil
	}
	if l.ch != nil {
		C.rs_cm_destroy_channel(l.ch)
		l.ch = nil
	}
}

// cmServerSession is one authenticated connect-cm client: how many QPs it
// connects, the token its requests must carry, and the QPs accepted.
// established and err are under the listener's mu.
type cmServerSession struct {
	l     *cmListener
	rec   cmRecord
	n     int
	depth int // our responder depth
	q     *qpSet

	from        net.IP // the authenticated client, for messages
	established int
	err         error
}

func (s *cmServerSession) endpoint() endpoint { return endpoint{} }
func (s *cmServerSession) cm() cmRecord       { return s.rec }

func (s *cmServerSession) close() {
	s.l.mu.Lock()
	delete(s.l.sessions, s)
	s.l.mu.Unlock()
	s.q.destroy()
}

var _ cmSession = (*cmServerSession)(nil)

func (l *cmListener) session(n, depth int) (serverSession, error) {
	s := &cmServerSession{l: l, n: n, depth: depth, rec: cmRecord{Port: uint16(l.port), MaxDestRdAtomic: uint8(depth)}}
	if _, err := rand.Read(s.rec.Token[:]); err != nil {
		return nil, err
	}
	var cq *C.struct_ibv_cq
	if err := verbErr(C.rs_create_cq(l.dev.ctx, C.int(n), &cq), ""); err != nil {
		return nil, err
	}
	s.q = newQPSet(n, cq)
	l.mu.Lock()
	l.sessions[s] = true
	l.mu.Unlock()
	return s, nil
}

// cmPoll is how long one accept holds the event channel before letting
// another session's accept take a turn.
const cmPoll = 100 * time.Millisecond

// accept connects the session's QPs: it accepts the connect requests that
// carry the session's token, each index once, until all are established,
// the handshake timeout passes or ctx ends. Requests with no open
// session's token are rejected.
func (l *cmListener) accept(ctx context.Context, s *cmServerSession, from net.IP, warn func(string)) error {
	deadline := time.Now().Add(handshakeTimeout)
	l.mu.Lock()
	s.from = from
	l.mu.Unlock()
	for {
		l.mu.Lock()
		switch {
		case s.err != nil:
			l.mu.Unlock()
			return s.err
		case s.established >= s.n:
			l.mu.Unlock()
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			n := s.established
			l.mu.Unlock()
			return fmt.Errorf("only %d of %d QPs connected through rdma_cm within %s", n, s.n, handshakeTimeout)
		}
		var ev C.rs_cm_event
		err := verbErr(C.rs_cm_wait(l.ch, C.int(min(left, cmPoll).Milliseconds()), &ev), "")
		if err == nil && ev.event >= 0 {
			l.dispatch(ev, warn)
		}
		l.mu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("accept QPs through rdma_cm: %w", err)
		case ctx.Err() != nil:
			return ctx.Err()
		}
	}
}

// dispatch hands ev to the session it belongs to; l.mu is held.
func (l *cmListener) dispatch(ev C.rs_cm_event, warn func(string)) {
	if ev.event == C.RDMA_CM_EVENT_CONNECT_REQUEST {
		pd := C.GoBytes(unsafe.Pointer(&ev.private_data[0]), ev.private_data_len)
		for s := range l.sessions {
			if i, ok := s.request(pd); ok {
				if err := l.acceptOne(s, i, ev); err != nil && s.err == nil {
					s.err = fmt.Errorf("accept %s: %w", qpName(i, s.n, 0), err)
				}
				return
			}
		}
		C.rs_cm_reject(ev.id)
		warn("rejected an rdma_cm connect request that carries no open session's token")
		return
	}
	var owner *cmServerSession
	for s := range l.sessions {
		for _, id := range s.q.ids {
			if id != nil && id == ev.id {
				owner = s
			}
		}
	}
	if owner == nil {
		return // a QP of a session that has ended
	}
	switch ev.event {
	case C.RDMA_CM_EVENT_ESTABLISHED:
		owner.established++
	case C.RDMA_CM_EVENT_REJECTED, C.RDMA_CM_EVENT_CONNECT_ERROR, C.RDMA_CM_EVENT_UNREACHABLE, C.RDMA_CM_EVENT_DISCONNECTED:
		if owner.established < owner.n && owner.err == nil {
			owner.err = fmt.Errorf("rdma_cm reported %s (status %d) while connecting the QPs of client %s", cmEventName(int(ev.event)), int(ev.status), owner.from)
		}
	}
}

// request checks a connect request's private data: the session's token
// and a QP index not yet connected.
func (s *cmServerSession) request(pd []byte) (int, bool) {
	if len(pd) < 18 || subtle.ConstantTimeCompare(pd[:16], s.rec.Token[:]) != 1 {
		return 0, false
	}
	i := int(pd[16])<<8 | int(pd[17])
	if i >= s.n || s.q.ids[i] != nil {
		return 0, false
	}
	return i, true
}

func (l *cmListener) acceptOne(s *cmServerSession, i int, ev C.rs_cm_event) error {
	id := ev.id
	if C.rs_cm_verbs(id) != l.dev.ctx {
		C.rs_cm_reject(id)
		return errors.New("the request arrived on another device than the one the region is registered on")
	}
	if err := verbErr(C.rs_cm_set_options(id, C.int(l.fabric.TrafficClass), C.int(l.fabric.Timeout)), ""); err != nil {
		C.rs_cm_reject(id)
		return err
	}
	var qp *C.struct_ibv_qp
	if err := verbErr(C.rs_cm_create_qp(id, l.dev.pd, s.q.cq, 1, &qp), ""); err != nil {
		C.rs_cm_reject(id)
		return err
	}
	s.q.ids[i], s.q.qps[i] = id, qp
	depth := s.depth
	if r := int(ev.initiator_depth); r > 0 && r < depth {
		depth = r
	}
	return verbErr(C.rs_cm_accept(id, C.int(depth), C.int(l.fabric.RNRRetry)), "")
}

// dialCM authenticates over the TCP connection, then connects the QPs
// through rdma_cm from local to the server's rdma_cm port: rdma_cm
// resolves the device that holds local.
func (c *client) dialCM(ctx context.Context, local net.IP, f transport.Fabric) error {
	registerProviders()
	_, rec, region, err := clientHandshakeMode(ctx, c.conn, c.cfg.Secret, hello{cm: true, qps: c.cfg.QPs})
	if err != nil {
		return err
	}
	c.handshakeNs = monotonicNs()
	abort := func(err error) error {
		sendAbort(c.conn, err)
		return err
	}
	if region.Length == 0 {
		return abort(errors.New("server announced an empty region"))
	}
	c.region = region
	if err := verbErr(C.rs_cm_channel(&c.cmch), "is the rdma_ucm module loaded?"); err != nil {
		return abort(err)
	}
	server := c.conn.RemoteAddr().(*net.TCPAddr).IP
	csrc, cdst := C.CString(local.String()), C.CString(server.String())
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cdst))
	n := c.cfg.QPs
	for i := 0; i < n; i++ {
		what := fmt.Sprintf("connect %s through rdma_cm to %s port %d", qpName(i, n, 0), server, rec.Port)
		var id *C.struct_rdma_cm_id
		if err := verbErr(C.rs_cm_create_id(c.cmch, &id), ""); err != nil {
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		if c.q != nil {
			c.q.ids[i] = id // released with the set from here
		}
		destroy := func() {
			if c.q == nil || c.q.ids[i] != id {
				C.rs_cm_destroy(id)
			}
		}
		if err := verbErr(C.rs_cm_set_options(id, C.int(f.TrafficClass), C.int(f.Timeout)), ""); err != nil {
			destroy()
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		if err := verbErr(C.rs_cm_resolve_addr(id, csrc, cdst, C.int(rec.Port), C.int(cmStep.Milliseconds())), ""); err != nil {
			destroy()
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		if err := expect(ctx, c.cmch, id, C.RDMA_CM_EVENT_ADDR_RESOLVED, what, fmt.Sprintf("is %s on an RDMA interface that reaches %s?", local, server)); err != nil {
			destroy()
			return abort(err)
		}
		if err := verbErr(C.rs_cm_resolve_route(id, C.int(cmStep.Milliseconds())), ""); err != nil {
			destroy()
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		if err := expect(ctx, c.cmch, id, C.RDMA_CM_EVENT_ROUTE_RESOLVED, what, "no route between the two RDMA interfaces"); err != nil {
			destroy()
			return abort(err)
		}
		if i == 0 {
			if err := c.cmDevice(id, local, int(rec.MaxDestRdAtomic)); err != nil {
				destroy()
				return abort(err)
			}
			c.q.ids[0] = id
		} else if C.rs_cm_verbs(id) != c.dev.ctx {
			return abort(fmt.Errorf("%s: rdma_cm resolved it on another device than QP 1's", what))
		}
		var qp *C.struct_ibv_qp
		if err := verbErr(C.rs_cm_create_qp(id, c.dev.pd, c.q.cq, C.int(c.perQP+1), &qp), "the device may allow fewer QPs or a shallower queue: lower qps or queue_depth"); err != nil {
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		c.q.qps[i] = qp
		pd := cmRequest(rec.Token, i)
		if err := verbErr(C.rs_cm_connect(id, unsafe.Pointer(&pd[0]), C.int(len(pd)), C.int(c.maxRd), 0, C.int(f.RetryCnt), C.int(f.RNRRetry)), ""); err != nil {
			return abort(fmt.Errorf("%s: %w", what, err))
		}
		if err := expect(ctx, c.cmch, id, C.RDMA_CM_EVENT_ESTABLISHED, what, "the server rejects requests without its session's token: are both nodes the same build?"); err != nil {
			return abort(err)
		}
	}
	c.path = c.dev.path(c.gid, true, c.dev.ethernet(), f)
	c.queryPath()
	return nil
}

// cmDevice takes the device rdma_cm resolved for the first QP: checks it
// against the plan, then makes the CQ, the QP set and the read buffer, and
// settles max_rd_atomic.
func (c *client) cmDevice(id *C.struct_rdma_cm_id, local net.IP, serverDepth int) error {
	ctx := C.rs_cm_verbs(id)
	dn := C.GoString(C.ibv_get_device_name(ctx.device))
	p := int(C.rs_cm_port(id))
	if err := checkCMDevice(dn, p, c.cfg.RDMA.Device, c.cfg.RDMA.IBPort, local); err != nil {
		return err
	}
	d, err := useContext(ctx, dn, p, transportName(int(ctx.device.transport_type)))
	if err != nil {
		return err
	}
	d.borrowed = true
	c.dev = d
	if err := c.checkDepth(); err != nil {
		return err
	}
	var cq *C.struct_ibv_cq
	if err := verbErr(C.rs_create_cq(d.ctx, C.int(c.cfg.QueueDepth+c.cfg.QPs), &cq), ""); err != nil {
		return err
	}
	c.q = newQPSet(c.cfg.QPs, cq)
	if err := c.allocBuffer(); err != nil {
		return err
	}
	c.maxRd, err = c.negotiate(serverDepth)
	return err
}
