//go:build rdma

package rdma

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/node/transport"
)

// raiseMemlock makes sure need bytes can be pinned. It raises the soft
// RLIMIT_MEMLOCK to unlimited (or to the hard limit), and fails naming the
// limit needed when that is not enough and the process cannot lock memory
// regardless (CAP_IPC_LOCK, which root has).
func raiseMemlock(need uint64, what string) error {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		return fmt.Errorf("read RLIMIT_MEMLOCK: %w", err)
	}
	if r.Cur == unix.RLIM_INFINITY || r.Cur >= need {
		return nil
	}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}) == nil {
		return nil
	}
	if r.Max == unix.RLIM_INFINITY || r.Max >= need {
		r.Cur = r.Max
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
			return fmt.Errorf("raise RLIMIT_MEMLOCK to %d: %w", r.Max, err)
		}
		return nil
	}
	if os.Geteuid() == 0 {
		return nil // CAP_IPC_LOCK: the limit does not apply
	}
	return fmt.Errorf("%s needs %d bytes of locked memory but RLIMIT_MEMLOCK allows %d (hard limit %d); hint: run as root, or raise memlock to at least %d KiB (ulimit -l, /etc/security/limits.conf, or LimitMEMLOCK= for a systemd unit)",
		what, need, r.Cur, r.Max, (need+1023)/1024)
}

// A mapping is one way to map the region's file for registration.
type mapping struct {
	name  string
	prot  int
	flags int
	rw    bool // needs the file open O_RDWR
}

// mappings returns the mappings to try, in order. All are registered with
// IBV_ACCESS_REMOTE_READ only, so the pin is read-only:
//
//   - shared-ro: PROT_READ, MAP_SHARED. The page cache itself, zero copies,
//     the right answer. Kernels before 6.2 add FOLL_FORCE|FOLL_WRITE to a
//     read-only pin, which a read-only shared mapping refuses (EFAULT).
//   - private-ro: PROT_READ, MAP_PRIVATE. Those old kernels then break COW
//     and pin private copies of the file's pages: same bytes as the file at
//     registration, more memory. Newer kernels pin the page cache pages.
//   - shared-rw: PROT_READ|PROT_WRITE, MAP_SHARED on a file opened O_RDWR.
//     A last resort, only when the file is writable; from 6.5 a writable
//     long-term pin of an ext4/xfs file is refused, but ours stays read-only.
func mappings(writable bool) []mapping {
	m := []mapping{
		{"shared-ro", unix.PROT_READ, unix.MAP_SHARED, false},
		{"private-ro", unix.PROT_READ, unix.MAP_PRIVATE, false},
	}
	if writable {
		m = append(m, mapping{"shared-rw", unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED, true})
	}
	return m
}

type server struct {
	cfg   transport.ServerConfig
	warn  func(string)
	dev   *device
	gid   GID
	mem   []byte
	mr    *C.struct_ibv_mr
	l     *transport.Listener // nil until Listen has opened it
	ready transport.ReadyInfo

	closeOnce sync.Once
}

// Listen opens the device, maps and registers the region, and listens.
func (t *Transport) Listen(ctx context.Context, cfg transport.ServerConfig, warn func(string)) (transport.Server, error) {
	if warn == nil {
		warn = func(string) {}
	}
	if cfg.Region.File == nil || cfg.Region.Size <= 0 {
		return nil, errors.New("rdma listen: empty region")
	}
	reg := cfg.Registration
	if reg == "" {
		reg = "pinned"
	}
	if reg != "pinned" && reg != "odp" && reg != "odp-prefetch" {
		return nil, fmt.Errorf("rdma listen: registration %q (want pinned, odp or odp-prefetch)", reg)
	}
	if int64(int(cfg.Region.Size)) != cfg.Region.Size {
		return nil, fmt.Errorf("rdma listen: region of %d bytes does not fit in memory", cfg.Region.Size)
	}
	if reg == "pinned" {
		if err := raiseMemlock(uint64(cfg.Region.Size), "registering the region"); err != nil {
			return nil, fmt.Errorf("rdma listen: %w", err)
		}
	}
	dev, err := openDevice(cfg.RDMA.Device, cfg.RDMA.IBPort)
	if err != nil {
		return nil, fmt.Errorf("rdma listen: %w", err)
	}
	s := &server{cfg: cfg, warn: warn, dev: dev}
	fail := func(err error) (transport.Server, error) {
		s.Close()
		return nil, fmt.Errorf("rdma listen: %w", err)
	}
	if reg != "pinned" && !dev.odpRCRead() {
		c := dev.attr.odp_caps
		return fail(fmt.Errorf("registration %s: device %s has no on-demand paging for RC RDMA READ (odp general caps %#x, rc caps %#x); hint: use registration: pinned on this device",
			reg, dev.name, uint64(c.general_caps), uint32(c.per_transport_caps.rc_odp_caps)))
	}
	s.gid, err = dev.pickGID(cfg.RDMA.GIDIndex, net.ParseIP(cfg.Host))
	if err != nil {
		return fail(err)
	}
	if err := s.register(reg); err != nil {
		return fail(err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fail(err)
	}
	s.l = transport.NewListener(ln.(*net.TCPListener))
	host := cfg.Host
	if host == "" {
		host = "0.0.0.0"
	}
	s.ready.Address = host
	s.ready.Port = s.l.Port()
	gi := s.gid.Index
	s.ready.GIDIndex = &gi
	return s, nil
}

// register maps the region by the first mapping that registers, and times
// the registration itself: for pinned it faults in and pins every page.
func (s *server) register(reg string) error {
	access := C.int(C.IBV_ACCESS_REMOTE_READ)
	if reg != "pinned" {
		access |= C.IBV_ACCESS_ON_DEMAND
	}
	size := int(s.cfg.Region.Size)
	var tried []string
	for _, m := range mappings(s.cfg.Region.Writable) {
		mem, err := unix.Mmap(int(s.cfg.Region.File.Fd()), 0, size, m.prot, m.flags)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: mmap: %v", m.name, err))
			continue
		}
		start := time.Now()
		var mr *C.struct_ibv_mr
		st := C.rs_reg_mr(s.dev.pd, unsafe.Pointer(&mem[0]), C.size_t(size), access, &mr)
		secs := time.Since(start).Seconds()
		if st.verb != nil {
			unix.Munmap(mem)
			tried = append(tried, fmt.Sprintf("%s: %v", m.name, verbErr(st, "")))
			if syscall.Errno(st.err) == syscall.ENOMEM {
				break // no other mapping needs less memory
			}
			continue
		}
		s.mem, s.mr = mem, mr
		s.ready.Mapping = m.name
		if len(tried) > 0 {
			s.warn(fmt.Sprintf("registered the region through a %s mapping after: %s", m.name, strings.Join(tried, "; ")))
		}
		if reg == "odp-prefetch" {
			start := time.Now()
			if err := verbErr(C.rs_advise_prefetch(s.dev.pd, mr), "prefetch is optional: use registration: odp"); err != nil {
				return fmt.Errorf("prefetch the region: %w", err)
			}
			secs = time.Since(start).Seconds()
		}
		if reg != "odp" {
			mbs := float64(size) / 1e6 / secs
			s.ready.RegistrationS, s.ready.RegistrationMBs = &secs, &mbs
		}
		return nil
	}
	hint := "run as root or raise RLIMIT_MEMLOCK; an EFAULT on every mapping means the kernel refuses to pin this file: try a file on another filesystem"
	if !s.cfg.Region.Writable {
		hint += ", or open it writable so the shared-rw mapping can be tried"
	}
	return fmt.Errorf("register %s (%d bytes) for remote read: every mapping failed: %s; hint: %s",
		s.cfg.Region.Path, size, strings.Join(tried, "; "), hint)
}

func (s *server) Ready() transport.ReadyInfo { return s.ready }

// Serve accepts until one client authenticates or the accept timeout
// passes, then waits for that client's bye: its READs need nothing from the
// server's CPU, so the bye's counts are the server's stats. A client that
// aborts or disconnects after the handshake without a bye fails Serve with
// an error wrapping errClientFailed, with the client's reason when it sent
// one. A connection refused in the handshake is logged and Serve keeps
// waiting.
func (s *server) Serve(ctx context.Context) (transport.ServeStats, error) {
	var st transport.ServeStats
	if s.l == nil {
		return st, fmt.Errorf("serve: %w", net.ErrClosed)
	}
	var sess serverSession
	c, release, err := s.l.Accept(ctx, s.cfg.AcceptTimeout, func(c *net.TCPConn, _ time.Time) error {
		// Inside Accept, Close waits for us: the region is still there
		// (after Close, Accept fails before it gets here).
		region := regionRecord{
			Addr: uint64(uintptr(unsafe.Pointer(&s.mem[0]))), RKey: uint32(s.mr.rkey), Length: uint64(s.cfg.Region.Size),
			Seed: s.cfg.Region.Seed, Patterned: s.cfg.Region.Patterned,
		}
		var err error
		sess, err = serverHandshake(ctx, c, s.cfg.Secret, region, s.prepare)
		return err
	}, func(from net.Addr, err error) {
		s.warn(fmt.Sprintf("refused connection from %s: %v", from, err))
	})
	if err != nil {
		return st, err
	}
	defer release()
	defer sess.close() // before release: Close frees the device once released
	start := time.Now()
	cpu := transport.StartCPU()
	n, reads, err := readEnd(c)
	st = transport.ServeStats{BytesServed: n, Requests: reads, Seconds: time.Since(start).Seconds(), CPU: cpu()}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	if err != nil {
		return st, fmt.Errorf("client %s: %w", c.RemoteAddr(), err)
	}
	return st, nil
}

// qpSet is a CQ and the RC QPs that share it.
type qpSet struct {
	cq  *C.struct_ibv_cq
	qps []*C.struct_ibv_qp // C memory, so C may keep the array
	arr **C.struct_ibv_qp
}

func createQPs(d *device, n, sendDepth, cqDepth int, access C.int) (*qpSet, error) {
	arr := (**C.struct_ibv_qp)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	q := &qpSet{arr: arr, qps: unsafe.Slice(arr, n)}
	st := C.rs_create_qps(d.ctx, d.pd, C.uint8_t(d.port), C.int(n), C.int(sendDepth), C.int(cqDepth), access, &q.cq, arr)
	if err := verbErr(st, "the device may allow fewer QPs or a shallower queue: lower qps or queue_depth"); err != nil {
		C.free(unsafe.Pointer(arr))
		return nil, err
	}
	return q, nil
}

func (q *qpSet) destroy() {
	if q == nil || q.arr == nil {
		return
	}
	C.rs_destroy_qps(q.cq, q.arr, C.int(len(q.qps)))
	C.free(unsafe.Pointer(q.arr))
	q.arr, q.qps, q.cq = nil, nil, nil
}

func randomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & 0xffffff
}

// local returns d's endpoint for qps, with fresh PSNs.
func local(d *device, gid GID, q *qpSet) endpoint {
	e := endpoint{LID: uint16(d.pattr.lid), GID: gidRaw(gid), MTU: uint8(d.pattr.active_mtu), MaxDestRdAtomic: uint8(d.maxRdAtom())}
	for _, qp := range q.qps {
		e.QPs = append(e.QPs, qpAddr{QPN: uint32(C.rs_qp_num(qp)), PSN: randomPSN()})
	}
	return e
}

// connect moves every QP of q to RTS against the peer's endpoint.
func connect(d *device, gid GID, q *qpSet, ours, theirs endpoint, maxRdAtomic int) error {
	mtu := min(ours.MTU, theirs.MTU)
	for i, qp := range q.qps {
		r := C.rs_remote{
			qpn: C.uint32_t(theirs.QPs[i].QPN), psn: C.uint32_t(theirs.QPs[i].PSN), lid: C.uint16_t(theirs.LID),
			sgid_index: C.int(gid.Index), hop_limit: 64, mtu: C.int(mtu),
			max_dest_rd_atomic: C.int(d.maxRdAtom()),
		}
		if d.ethernet() {
			r.is_global = 1
		}
		for j, b := range theirs.GID {
			r.gid[j] = C.uint8_t(b)
		}
		if d.ethernet() && theirs.GID == ([16]byte{}) {
			return errors.New("the peer sent an empty GID, and RoCE routes by GID; hint: set gid_index on the peer")
		}
		var stage C.int
		st := C.rs_connect(qp, C.uint8_t(d.port), &r, C.uint32_t(ours.QPs[i].PSN), C.int(maxRdAtomic), &stage)
		if st.verb != nil {
			hint := ""
			if stage == 1 {
				hint = fmt.Sprintf("RTR failing usually means a wrong address handle: check gid_index (%d used on %s port %d; `node devices` lists them) and the MTU (path MTU %d bytes, the smaller of ours %d and the peer's %d)",
					gid.Index, d.name, d.port, mtuBytes(int(mtu)), mtuBytes(int(ours.MTU)), mtuBytes(int(theirs.MTU)))
			} else {
				hint = fmt.Sprintf("RTS with max_rd_atomic %d: the device allows %d", maxRdAtomic, d.maxInitRdAtom())
			}
			return fmt.Errorf("connect QP %d of %d: %w", i+1, len(q.qps), verbErr(st, hint))
		}
	}
	return nil
}

type session struct {
	ep endpoint
	q  *qpSet
}

func (x *session) endpoint() endpoint { return x.ep }
func (x *session) close()             { x.q.destroy() }

// prepare makes the QPs for an authenticated client and connects them.
func (s *server) prepare(client endpoint) (serverSession, error) {
	q, err := createQPs(s.dev, len(client.QPs), 1, 1, C.IBV_ACCESS_REMOTE_READ)
	if err != nil {
		return nil, fmt.Errorf("create %d QPs: %w", len(client.QPs), err)
	}
	ours := local(s.dev, s.gid, q)
	// The server issues no READs; its requester depth only has to be legal.
	if err := connect(s.dev, s.gid, q, ours, client, max(1, min(s.dev.maxInitRdAtom(), int(client.MaxDestRdAtomic)))); err != nil {
		q.destroy()
		return nil, err
	}
	return &session{ep: ours, q: q}, nil
}

// Close deregisters the region and releases everything; it is idempotent.
func (s *server) Close() error {
	s.closeOnce.Do(func() {
		if s.l != nil {
			s.l.Close() // waits for Serve to let go of the region and device
		}
		if s.mr != nil {
			C.ibv_dereg_mr(s.mr)
			s.mr = nil
		}
		if s.mem != nil {
			unix.Munmap(s.mem)
			s.mem = nil
		}
		if s.dev != nil {
			s.dev.close()
		}
	})
	return nil
}
