//go:build rdma

package rdma

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/node/rdmanl"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

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
	cfg    transport.ServerConfig
	fabric transport.Fabric
	cm     bool // connect cm
	warn   func(string)
	dev    *device
	gid    GID
	grh    bool
	mem    []byte
	mrs    []*C.struct_ibv_mr // the region's memory regions, in order (cfg.MRSize)
	mrSize uint64             // the length of each but the last
	odp    bool
	l      *transport.Listener[serverSession] // nil until Listen has opened it
	cml    *cmListener                        // connect cm: the rdma_cm listener
	ready  transport.ReadyInfo
	watch  asyncWatch
	// prefetchBy is who carried out odp_prefetch (see device.prefetch).
	prefetchBy string
	// spans are a pipelined server's memory regions, registered one by
	// one in its session (pipeline.go); mrMu guards mrs against Close.
	spans []prefetchSegment
	mrMu  sync.Mutex
	// pinnedPeak is a pipelined session's most bytes registered at once.
	pinnedPeak atomic.Int64
	// ring is io direct's (direct.go); nil otherwise.
	ring *ring

	closeOnce sync.Once
}

// asyncWatch reads the device's async events while the server is up. An
// event that breaks the path (see breakingEvent) is kept as err, and the
// sessions' connections are closed, so a client's read ends naming it.
type asyncWatch struct {
	ev *eventWatch

	mu    sync.Mutex
	err   error
	conns map[net.Conn]bool
}

// Listen listens, opens the device that holds the listen address, maps and
// registers the region.
func (t *Transport) Listen(ctx context.Context, cfg transport.ServerConfig, warn func(string)) (transport.Server, error) {
	s, err := newServer(cfg, warn)
	if err != nil {
		return nil, fmt.Errorf("rdma listen: %w", err)
	}
	if err := s.listen(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("rdma listen: %w", err)
	}
	return s, nil
}

// newServer checks what only node knows (a region that fits in memory,
// the host's memory for pinning) before anything is opened. The plan's
// bounds were checked where the schema says, by node's flags.
func newServer(cfg transport.ServerConfig, warn func(string)) (*server, error) {
	if warn == nil {
		warn = func(string) {}
	}
	if cfg.Region.File == nil || cfg.Region.Size <= 0 {
		return nil, errors.New("empty region")
	}
	reg := cfg.Registration
	if reg == "" {
		reg = "pinned"
	}
	if reg != "pinned" && reg != "odp" {
		return nil, fmt.Errorf("registration %q (want pinned or odp)", reg)
	}
	if cfg.RDMA.ODPPrefetch && reg != "odp" {
		return nil, errors.New("odp_prefetch needs registration odp")
	}
	cm, err := connectMode(cfg.RDMA)
	if err != nil {
		return nil, err
	}
	if int64(int(cfg.Region.Size)) != cfg.Region.Size {
		return nil, fmt.Errorf("region of %d bytes does not fit in memory", cfg.Region.Size)
	}
	if reg == "pinned" {
		need, what := pinnedNeed(cfg)
		if err := checkPinnable(need, what); err != nil {
			return nil, err
		}
		if err := raiseMemlock(uint64(need), what); err != nil {
			if cfg.IO != results.IODirect && (!cfg.Pipeline || cfg.Window == 0) {
				err = fmt.Errorf("%w; or stream the file through a window: server.window (node serve --pipeline --window N), N × mr_size within the limit", err)
			}
			return nil, err
		}
	}
	return &server{cfg: cfg, fabric: fabricOf(cfg.RDMA), cm: cm, warn: warn, odp: reg == "odp"}, nil
}

// pinnedNeed is the most bytes cfg's server registers at once, and what
// for: the file, or a pipelined window's regions.
func pinnedNeed(cfg transport.ServerConfig) (int64, string) {
	need := results.PinnedBytes(cfg.Region.Size, cfg.MRSize, cfg.Pipeline, cfg.Window, cfg.IO)
	switch {
	case cfg.IO == results.IODirect && cfg.MRSize > 0:
		return need, fmt.Sprintf("io direct's ring of %d buffers of %d bytes", need/cfg.MRSize, cfg.MRSize)
	case need < cfg.Region.Size:
		return need, fmt.Sprintf("a window of %d memory regions of %d bytes", cfg.Window, cfg.MRSize)
	}
	return need, "registering the region"
}

// listen opens the TCP listener, the device its address picks, and
// registers the region on it. The caller closes s on failure.
func (s *server) listen(ctx context.Context) error {
	// The TCP listener comes first: binding resolves the listen address,
	// and the address picks the device, before anything is registered.
	ip, err := s.listenTCP(ctx)
	if err != nil {
		return err
	}
	if err := s.openDevice(ip); err != nil {
		return err
	}
	s.startWatch()
	register := s.register
	switch {
	case s.cfg.IO == results.IODirect:
		register = s.setupRing
	case s.cfg.Pipeline:
		register = s.mapForPipeline
	}
	if err := register(); err != nil {
		return err
	}
	host := s.cfg.Host
	if host == "" {
		host = "0.0.0.0"
	}
	s.ready.Address = host
	s.ready.Port = s.l.Port()
	gi := s.gid.Index
	if s.gid.GID != "" {
		s.ready.GIDIndex = &gi
	}
	s.ready.Path = s.dev.path(s.gid, s.cm, s.grh, s.fabric)
	s.ready.Path.ODPPrefetch = s.prefetchBy
	return nil
}

// listenTCP opens the TCP listener and returns the address it bound,
// which must name the RDMA interface.
func (s *server) listenTCP(ctx context.Context) (net.IP, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, results.Network, net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port)))
	if err != nil {
		return nil, err
	}
	s.l = transport.NewListener(ln.(*net.TCPListener), transport.Admission[serverSession]{
		Handshake: s.handshake, Timeout: handshakeTimeout,
		Refused: func(from net.Addr, err error) {
			s.warn(fmt.Sprintf("refused connection from %s: %v", from, err))
		},
		Discard: func(sess serverSession) { sess.close() },
	})
	ip := ln.Addr().(*net.TCPAddr).IP
	if ip.IsUnspecified() && (s.cm || s.cfg.RDMA.Device == "") {
		why := "the region is registered on one device before any client connects, so the address must say which"
		if s.cm {
			why = "rdma_cm binds to the address, and the address picks the device"
		}
		return nil, fmt.Errorf("listening on all addresses (%s) with rdma: %s; hint: set the server's data_address (node serve --listen) to the address of its RDMA interface%s",
			ln.Addr(), why, map[bool]string{true: "", false: ", or name the device (rdma.device)"}[s.cm])
	}
	return ip, nil
}

// openDevice opens the device for ip (through rdma_cm with connect cm),
// checks it can serve the point, and picks the GID.
func (s *server) openDevice(ip net.IP) error {
	var err error
	if s.cm {
		if s.cml, s.dev, err = cmListen(ip, s.cfg.RDMA.Device, s.cfg.RDMA.IBPort, s.fabric); err != nil {
			return err
		}
	} else {
		if s.dev, err = openDevice(s.cfg.RDMA.Device, s.cfg.RDMA.IBPort, ip); err != nil {
			return err
		}
		if needsCM(s.dev.transport) {
			return fmt.Errorf("%w: %s is an %s device; hint: set rdma.connect: cm (node --rdma-connect cm) on both hosts", transport.ErrNeedsCM, s.dev.name, s.dev.transport)
		}
	}
	dev := s.dev
	if s.odp && !dev.odpRCRead() {
		c := dev.attr.odp_caps
		return fmt.Errorf("registration odp: device %s has no on-demand paging for RC RDMA READ (odp general caps %#x, rc caps %#x); hint: use registration: pinned on this device",
			dev.name, uint64(c.general_caps), uint32(c.per_transport_caps.rc_odp_caps))
	}
	if int(s.fabric.PKeyIndex) >= int(dev.pattr.pkey_tbl_len) && !s.cm {
		return fmt.Errorf("pkey_index %d: %s port %d has %d P_Key entries", s.fabric.PKeyIndex, dev.name, dev.port, int(dev.pattr.pkey_tbl_len))
	}
	// With connect cm rdma_cm picks the GID; ours only describes the
	// listener until a client connects.
	if !s.cm || dev.ethernet() {
		if s.gid, s.grh, err = dev.pickGID(s.cfg.RDMA.GIDIndex, ip); err != nil && !s.cm {
			return err
		}
	}
	s.grh = needGRH(dev.ethernet(), s.cfg.RDMA.GIDIndex >= 0)
	return nil
}

// path is what the events say of d's side of a connection.
func (d *device) path(g GID, cm, grh bool, f transport.Fabric) *results.RDMAPath {
	p := &results.RDMAPath{
		Device: d.name, IBPort: d.port, LinkLayer: linkLayerName(d.pattr.link_layer), GID: g.GID, GIDType: g.Type,
		Connect: results.ConnectTCP, GRH: grh, ServiceLevel: f.ServiceLevel, PKeyIndex: f.PKeyIndex,
		Timeout: f.Timeout, RetryCnt: f.RetryCnt, RNRRetry: f.RNRRetry, MinRNRTimer: f.MinRNRTimer,
		TrafficClassSet: f.TrafficClass >= 0,
	}
	if !d.ethernet() {
		p.LID = int(d.pattr.lid)
	}
	if cm {
		p.Connect = "cm"
		p.DefaultRoCETOS = defaultRoCETOS(configfsRDMACM, d.name, d.port)
	}
	p.TrafficClass = trafficClass(f.TrafficClass, cm, p.DefaultRoCETOS)
	return p
}

// register maps the region by the first mapping that registers, and times
// the registration itself: for pinned it faults in and pins every page,
// for odp it only sets up the translation (and then the prefetch, when
// asked, brings the pages in). With an mr_size the mapping is registered
// as several memory regions, and the time covers them all.
func (s *server) register() error {
	access := C.int(C.IBV_ACCESS_REMOTE_READ)
	if s.odp {
		access |= C.IBV_ACCESS_ON_DEMAND
		if s.cfg.RDMA.ODPPrefetch && s.dev.prefetchNeedsLocalWrite() {
			access |= C.IBV_ACCESS_LOCAL_WRITE
			s.warn(fmt.Sprintf("odp_prefetch on %s (rxe): the region is registered with local write access too, which rxe's advise_mr requires of the MR it prefetches; odp pins nothing, and reads and the prefetch fault pages in read-only", s.dev.name))
		}
	}
	spans, err := s.memoryRegions()
	if err != nil {
		return err
	}
	r, err := s.mapAndRegister(nil, spans, access)
	if err != nil {
		return err
	}
	s.mem, s.mrs, s.mrSize = r.mem, r.mrs, spans[0].len
	s.ready.Mapping = r.name
	s.ready.RegistrationS = &r.secs
	s.ready.Regions = len(r.mrs)
	if len(r.tried) > 0 {
		s.warn(fmt.Sprintf("registered the region through a %s mapping after: %s", r.name, strings.Join(r.tried, "; ")))
	}
	return s.prefetchAll(r.secs)
}

// mapped is the file mapped by one mapping with spans of it registered.
type mapped struct {
	mem   []byte
	mrs   []*C.struct_ibv_mr
	name  string   // the mapping's
	secs  float64  // how long registering took
	tried []string // the mappings that failed before it, and why
}

// mapAndRegister maps the file by the first mapping (see mappings) under
// which spans register, each as a memory region: all of the file's, or a
// pipeline's first. first, when set, is the file already mapped by the
// first mapping, tried as it is. A mapping that fails is unmapped (first
// too). ENOMEM ends the tries: no other mapping needs less memory.
func (s *server) mapAndRegister(first []byte, spans []prefetchSegment, access C.int) (mapped, error) {
	var tried []string
	for i, m := range mappings(s.cfg.Region.Writable) {
		mem := first
		if i > 0 || mem == nil {
			var err error
			if mem, err = unix.Mmap(int(s.cfg.Region.File.Fd()), 0, int(s.cfg.Region.Size), m.prot, m.flags); err != nil {
				tried = append(tried, fmt.Sprintf("%s: mmap: %v", m.name, err))
				continue
			}
		}
		start := time.Now()
		mrs, st := regMRs(s.dev.pd, mem, spans, access)
		secs := time.Since(start).Seconds()
		if st.verb == nil {
			return mapped{mem: mem, mrs: mrs, name: m.name, secs: secs, tried: tried}, nil
		}
		unix.Munmap(mem)
		tried = append(tried, fmt.Sprintf("%s: %v", m.name, verbErr(st, "")))
		if syscall.Errno(st.err) == syscall.ENOMEM {
			break
		}
	}
	return mapped{}, s.registerFailed(tried)
}

// memoryRegions returns the spans the region is registered as, having
// checked that node and the device can register that many of that size.
func (s *server) memoryRegions() ([]prefetchSegment, error) {
	size := s.cfg.Region.Size
	if n := results.MRCount(size, s.cfg.MRSize); n > maxRegions {
		return nil, fmt.Errorf("%d bytes in memory regions of %d bytes make %d regions, more than node's %d; hint: raise mr_size", size, s.cfg.MRSize, n, maxRegions)
	}
	spans := mrSpans(uint64(size), uint64(s.cfg.MRSize))
	what, hint := "the region (file_size)", "lower file_size, or set server.mr_size to register it as several regions"
	if len(spans) > 1 {
		what, hint = "a memory region (mr_size)", "lower mr_size"
	}
	if err := checkMRSize(spans[0].len, s.dev.maxMRSize(), s.dev.name, what, hint); err != nil {
		return nil, err
	}
	return spans, nil
}

// registerFailed is the error when every mapping failed to register.
func (s *server) registerFailed(tried []string) error {
	size := uint64(s.cfg.Region.Size)
	hint := memlockHint(size) + "; an EFAULT on every mapping means the kernel refuses to pin this file: try a file on another filesystem"
	if !s.cfg.Region.Writable {
		hint += ", or open it writable so the shared-rw mapping can be tried"
	}
	return fmt.Errorf("register %s (%d bytes) for remote read: every mapping failed: %s; hint: %s",
		s.cfg.Region.Path, size, strings.Join(tried, "; "), hint)
}

// regMRs registers mem as one memory region per span, in order. On a
// failure it deregisters those it made and returns the verb's status.
func regMRs(pd *C.struct_ibv_pd, mem []byte, spans []prefetchSegment, access C.int) ([]*C.struct_ibv_mr, C.rs_status) {
	mrs := make([]*C.struct_ibv_mr, 0, len(spans))
	for _, sp := range spans {
		var mr *C.struct_ibv_mr
		st := C.rs_reg_mr(pd, unsafe.Pointer(&mem[sp.off]), C.size_t(sp.len), access, &mr)
		if st.verb != nil {
			for _, m := range mrs {
				C.ibv_dereg_mr(m)
			}
			return nil, st
		}
		mrs = append(mrs, mr)
	}
	return mrs, C.rs_status{}
}

// prefetchAll prefetches every memory region when odp_prefetch asks, and
// sets the registration rate when registering brought every page in.
func (s *server) prefetchAll(regSecs float64) error {
	inSecs := regSecs
	if s.cfg.RDMA.ODPPrefetch {
		var p float64
		for i, mr := range s.mrs {
			secs, by, err := s.dev.prefetch(mr, uint64(mr.length))
			if err != nil {
				return fmt.Errorf("memory region %d of %d: %w", i+1, len(s.mrs), err)
			}
			p += secs
			s.prefetchBy = by
		}
		s.ready.PrefetchS = &p
		inSecs += p
	}
	if !s.odp || s.cfg.RDMA.ODPPrefetch {
		mbs := float64(s.cfg.Region.Size) / 1e6 / inSecs
		s.ready.RegistrationMBs = &mbs
	}
	return nil
}

// prefetch advises the whole of mr, n bytes, in segments an SGE can
// carry, and returns how long it took and who carried it out: "provider",
// libibverbs' provider, or "kernel", the kernel's uverbs ioctl, asked
// directly where the provider has no advise_mr and says EOPNOTSUPP
// without asking the kernel (rdma-core 44's rxe, while the rxe of kernel
// 7.x has it). A kernel that has none either says EOPNOTSUPP itself.
func (d *device) prefetch(mr *C.struct_ibv_mr, n uint64) (float64, string, error) {
	const hint = "prefetch is optional: leave odp_prefetch off"
	segs := prefetchSegments(n)
	by, driverID := "provider", uint32(0)
	start := time.Now()
	st := C.rs_advise_prefetch(d.pd, mr, C.uint64_t(segs[0].off), C.uint32_t(segs[0].len))
	if st.verb != nil && syscall.Errno(st.err) == syscall.EOPNOTSUPP {
		id, err := rdmanl.UverbsDriverID(d.name)
		if err != nil {
			return 0, "", fmt.Errorf("prefetch the region: %w, and the kernel cannot be asked directly: %w", verbErr(st, ""), err)
		}
		by, driverID = "kernel", id
		start = time.Now()
	}
	for i, sg := range segs {
		switch {
		case by == "kernel":
			st = C.rs_advise_prefetch_kernel(d.pd, mr, C.uint64_t(sg.off), C.uint32_t(sg.len), C.uint32_t(driverID))
		case i > 0:
			st = C.rs_advise_prefetch(d.pd, mr, C.uint64_t(sg.off), C.uint32_t(sg.len))
		}
		if err := verbErr(st, hint); err != nil {
			return 0, "", fmt.Errorf("prefetch bytes %d..%d of the region: %w", sg.off, sg.off+sg.len, err)
		}
	}
	return time.Since(start).Seconds(), by, nil
}

func (s *server) Ready() transport.ReadyInfo { return s.ready }

// startWatch starts reading the device's async events until Close.
func (s *server) startWatch() {
	s.watch.conns = map[net.Conn]bool{}
	s.watch.ev = watchEvents(s.dev, s.gid, s.broken)
}

// broken keeps the first path-breaking event's error and closes every
// session's connection, so Serve ends with it.
func (s *server) broken(err error) {
	w := &s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	for c := range w.conns {
		c.Close()
	}
}

// track adds a session's connection to those broken() closes, or returns
// the error of an event seen already. untrack removes it and returns that
// error, if one has been seen.
func (s *server) track(c net.Conn) error {
	w := &s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.conns != nil {
		w.conns[c] = true
	}
	return nil
}

func (s *server) untrack(c net.Conn) error {
	w := &s.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.conns, c)
	return w.err
}

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
	c, sess, release, err := s.l.Accept(ctx, s.cfg.AcceptTimeout)
	if err != nil {
		return st, err
	}
	defer release()
	defer sess.close() // before release: Close frees the device once released
	if cs, ok := sess.(*cmServerSession); ok {
		if err := s.cml.accept(ctx, cs, c.RemoteAddr().(*net.TCPAddr).IP, s.warn); err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			return st, fmt.Errorf("client %s: %w", c.RemoteAddr(), err)
		}
	}
	if err := s.track(c); err != nil {
		return st, err
	}
	// The CPU's window opens first, so it holds the session's (its start
	// reads every thread's /proc stat, slow under emulation).
	cpu := transport.StartCPU()
	start := time.Now()
	pipe, released := s.startPipeline(ctx, c)
	n, reads, err := readEnd(c, released)
	st = transport.ServeStats{BytesServed: n, Requests: reads, Seconds: time.Since(start).Seconds(), CPU: cpu()}
	if p, perr := pipe(); perr != nil {
		err = perr // the client's abort only echoes it
	} else {
		st.Pipeline = p
	}
	switch {
	case s.odp:
	case s.cfg.Pipeline || s.ring != nil:
		st.PinnedPeakBytes = ref(s.pinnedPeak.Load())
	default:
		st.PinnedPeakBytes = ref(s.cfg.Region.Size) // registered whole before ready
	}
	if err != nil && ctx.Err() == nil {
		s.watch.ev.await(eventGrace, s.eventSeen) // the client's READs failed: name the event
	}
	if werr := s.untrack(c); werr != nil {
		return st, werr
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	if err != nil {
		return st, fmt.Errorf("client %s: %w", c.RemoteAddr(), err)
	}
	return st, nil
}

// eventSeen reports whether the watch has seen a path-breaking event.
func (s *server) eventSeen() bool {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	return s.watch.err != nil
}

type session struct {
	ep endpoint
	q  *qpSet
}

func (x *session) endpoint() endpoint { return x.ep }
func (x *session) close()             { x.q.destroy() }

// prepare makes the QPs for an authenticated client and connects them
// (connect tcp), or readies the rdma_cm accept of its QPs (connect cm).
func (s *server) prepare(h hello) (serverSession, error) {
	if h.cm {
		return s.cml.session(h.qps, s.dev.maxRdAtom())
	}
	client := h.ep
	q, err := createQPs(s.dev, len(client.QPs), 1, 1, C.IBV_ACCESS_REMOTE_READ, s.fabric)
	if err != nil {
		return nil, fmt.Errorf("create %d QPs: %w", len(client.QPs), err)
	}
	ours := localEndpoint(s.dev, s.gid, q)
	// The server issues no READs; its requester depth only has to be
	// legal: auto by the one rule, and at least 1.
	depth, _ := results.MaxRdAtomic(0, s.dev.maxInitRdAtom(), int(client.MaxDestRdAtomic))
	if err := connect(s.dev, s.gid, s.grh, q, ours, client, max(1, depth), s.fabric); err != nil {
		q.destroy()
		return nil, err
	}
	return &session{ep: ours, q: q}, nil
}

// rkeys returns the memory regions' rkeys, in order.
func (s *server) rkeys() []uint32 {
	keys := make([]uint32, len(s.mrs))
	for i, mr := range s.mrs {
		keys[i] = uint32(mr.rkey)
	}
	return keys
}

// handshake admits one client, in a goroutine of the Listener's; ctx ends
// when the Listener closes. Close waits for it: the region is still there.
func (s *server) handshake(ctx context.Context, c *net.TCPConn) (serverSession, error) {
	region := regionRecord{
		Addr: uint64(uintptr(unsafe.Pointer(&s.mem[0]))), Length: uint64(s.cfg.Region.Size),
		MRSize: s.mrSize, RKeys: s.rkeys(),
		Seed: s.cfg.Region.Seed, Patterned: s.cfg.Region.Patterned, ODP: s.odp,
	}
	if s.cfg.Pipeline || s.ring != nil {
		region.Pipelined, region.RKeys = true, make([]uint32, len(s.spans))
		region.Windowed = s.newWindow() != nil
	}
	return serverHandshakeMode(ctx, c, s.cfg.Secret, region, s.cm, s.prepare)
}

// Close deregisters the region and releases everything; it is idempotent.
func (s *server) Close() error {
	s.closeOnce.Do(func() {
		if s.l != nil {
			s.l.Close() // waits for Serve to let go of the region and device
		}
		s.watch.ev.Stop() // before the device closes
		s.mrMu.Lock()
		for _, mr := range s.mrs {
			if mr != nil { // a window's released ones are gone
				C.ibv_dereg_mr(mr)
			}
		}
		s.mrs = nil
		s.mrMu.Unlock()
		if s.mem != nil {
			unix.Munmap(s.mem)
			s.mem = nil
		}
		s.closeRing()
		if s.dev != nil {
			s.dev.close()
		}
		if s.cml != nil {
			s.cml.close()
		}
	})
	return nil
}
