// Package tcp is node's transport over a plain TCP connection, for machines
// without RDMA and for tests. See wire.go for the framing.
//
// The client uses one connection and keeps up to QueueDepth requests in
// flight on it, from one goroutine that reads each reply and sends the
// next requests; QPs is ignored (it only means something to RDMA). Its
// socket's SO_RCVLOWAT holds the wakeup until a block's bytes are there.
//
// The server answers each request with the reply header (sent with
// MSG_MORE, so it leaves with the data) and sendfile(2) of the bytes from
// the file's page cache: the kernel queues the cached pages themselves,
// with no copy into the socket (that copy was 43% of the server's CPU in
// a loopback profile). To a client on loopback, to one behind a veth
// when the reply is under 1 MiB, and on a connection that is not a TCP
// socket (the fuzz test), it writes the bytes from its read-only mapping
// of the region instead; see SendAuto for why. Every request already
// read is answered in one batch: one writev of all their replies (or,
// with sendfile, one corked burst), so a reply costs the connection no
// turn of its own.
package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/counters"
	"rdmasweep/node/pattern"
	"rdmasweep/node/region"
	"rdmasweep/node/transport"
	"rdmasweep/node/workload"
	"rdmasweep/results"
	"rdmasweep/results/linerate"
)

// DefaultHandshakeTimeout bounds one connection's handshake: a silent
// connection holds only itself (transport.Listener), and only so long.
const DefaultHandshakeTimeout = 5 * time.Second

// Transport makes tcp servers and clients.
type Transport struct {
	// HandshakeTimeout bounds each handshake; 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// Send chooses how the server sends the region's bytes.
	Send SendMode
}

// SendMode is how a server sends the bytes of a reply.
type SendMode int

const (
	// SendAuto uses sendfile, except to a client on a loopback address,
	// which gets SendWrite, and through a veth (another network namespace
	// of the same machine), which gets SendWrite for replies under
	// vethSendfileMin. There the client copies the bytes out of the very
	// pages the server queued, one 4 KiB page-cache fragment at a time
	// after sendfile. Measured here side by side (2 cores, 16 in flight),
	// sendfile against a write: on loopback at 1 MiB, 0.54-0.67 of its
	// bandwidth, with half as much server CPU again per GB; through a veth
	// at 128 KiB 0.60-0.77, at 256 KiB 0.83-0.89, at 512 KiB 0.95-1.05.
	// Through a veth at 1 MiB, on an idle machine, the server's core is
	// what runs out (0.96 busy, its client 0.25): sendfile spares it the
	// copy (server CPU per GB 0.24-0.28 against 0.27-0.44) and carried
	// 1.27-1.33 of a write's bandwidth; with the cores shared with other
	// work, 0.83-1.08. A veth is told by its link kind, over netlink
	// (linerate.Ifaces). Over a NIC the client copies from its own receive
	// buffers either way, and sendfile spares the server its copy.
	SendAuto SendMode = iota
	// SendFile sends with sendfile(2) from the file's page cache.
	SendFile
	// SendWrite writes from the server's mapping of the region: one copy
	// into the socket.
	SendWrite
)

// vethSendfileMin is the smallest reply SendAuto sends with sendfile to
// a client through a veth.
const vethSendfileMin = 1 << 20

// noSendfile is sendfileMin's answer when every reply is written.
const noSendfile = math.MaxInt

// sendfileMin is the smallest reply sent to c with sendfile, noSendfile
// when none is.
func (t *Transport) sendfileMin(c *net.TCPConn) int {
	switch t.Send {
	case SendFile:
		return 0
	case SendWrite:
		return noSendfile
	}
	var remote, local net.IP
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		remote = a.IP
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		local = a.IP
	}
	return autoSendfileMin(remote, local, throughVeth)
}

// autoSendfileMin is SendAuto's rule for a connection from local to
// remote, with veth telling whether an address is on a veth.
func autoSendfileMin(remote, local net.IP, veth func(net.IP) bool) int {
	switch {
	case remote != nil && remote.IsLoopback():
		return noSendfile
	case local != nil && veth(local):
		return vethSendfileMin
	}
	return 0
}

// throughVeth reports whether the interface holding ip is a veth (its
// link kind); false when that cannot be told.
func throughVeth(ip net.IP) bool {
	ifs, err := linerate.Ifaces()
	if err != nil {
		return false
	}
	i, ok := linerate.Holding(ifs, ip)
	return ok && i.Kind == "veth"
}

var _ transport.Transport = (*Transport)(nil)

// New returns a tcp transport with default settings.
func New() *Transport { return &Transport{} }

// Name returns "tcp".
func (*Transport) Name() string { return results.TransportTCP }

func (t *Transport) handshakeTimeout() time.Duration {
	if t.HandshakeTimeout > 0 {
		return t.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

// Listen maps the region read-only and opens the listener.
func (t *Transport) Listen(ctx context.Context, cfg transport.ServerConfig, warn func(string)) (transport.Server, error) {
	if warn == nil {
		warn = func(string) {}
	}
	if cfg.Region.File == nil || cfg.Region.Size <= 0 {
		return nil, errors.New("tcp listen: empty region")
	}
	m, err := (&region.File{File: cfg.Region.File, Path: cfg.Region.Path, Size: cfg.Region.Size}).Map()
	if err != nil {
		return nil, fmt.Errorf("tcp listen: %w", err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, results.Network, net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		region.Unmap(m)
		return nil, fmt.Errorf("tcp listen: %w", err)
	}
	host := cfg.Host
	if host == "" {
		host = "0.0.0.0"
	}
	// sendfile reads through a descriptor of the server's own, so the
	// caller's file may be closed or seeked without touching it.
	fd, err := dupFile(cfg.Region.File)
	if err != nil {
		ln.Close()
		region.Unmap(m)
		return nil, fmt.Errorf("tcp listen: %w", err)
	}
	s := &server{t: t, cfg: cfg, warn: warn, mem: m, fd: fd}
	if cfg.IO == results.IODirect {
		if s.direct, err = openDirect(regionConfig{path: cfg.Region.Path, size: cfg.Region.Size, window: cfg.Window}); err != nil {
			ln.Close()
			region.Unmap(m)
			unix.Close(fd)
			return nil, fmt.Errorf("tcp listen: %w", err)
		}
	}
	s.l = transport.NewListener(ln.(*net.TCPListener), transport.Admission[struct{}]{
		Handshake: func(_ context.Context, c *net.TCPConn) (struct{}, error) { return struct{}{}, s.handshake(c) },
		Timeout:   t.handshakeTimeout(),
		Refused: func(from net.Addr, err error) {
			warn(fmt.Sprintf("refused connection from %s: %v", from, err))
		},
	})
	s.ready = transport.ReadyInfo{Address: host, Port: s.l.Port(), Mapping: "shared-ro"}
	return s, nil
}

// dupFile returns a new descriptor (close-on-exec) for f's open file.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd := -1
	cerr := rc.Control(func(fd uintptr) {
		nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, fmt.Errorf("dup %s: %w", f.Name(), err)
	}
	return nfd, nil
}

type server struct {
	t     *Transport
	cfg   transport.ServerConfig
	warn  func(string)
	l     *transport.Listener[struct{}]
	mem   []byte
	fd    int // the region's file, for sendfile; -1 when there is none
	ready transport.ReadyInfo
	// direct is io direct's ring (direct.go); nil otherwise. The mapping
	// then only sizes the region.
	direct *directRing

	closeOnce sync.Once
	closeErr  error
}

func (s *server) Ready() transport.ReadyInfo { return s.ready }

// Serve accepts until one client authenticates or the accept timeout
// passes, then serves that client until it disconnects.
func (s *server) Serve(ctx context.Context) (transport.ServeStats, error) {
	var st transport.ServeStats
	c, _, release, err := s.l.Accept(ctx, s.cfg.AcceptTimeout)
	if err != nil {
		return st, err
	}
	defer release()
	// The CPU's window opens first, so it holds the session's (its start
	// reads every thread's /proc stat, slow under emulation).
	cpu := transport.StartCPU()
	start := time.Now()
	tcp := tcpPhase(c)
	send := s.writer(c)
	var sess *directSession
	if s.direct != nil {
		sess = s.direct.start(ctx, s.cfg.Region.Size)
		send = s.writevDirect(ctx, c, sess)
	}
	err = s.serveConn(c, &st, send)
	if sess != nil {
		st.Pipeline = sess.finish(s.cfg.Region.Size)
	}
	st.Seconds, st.CPU = time.Since(start).Seconds(), cpu()
	st.TCP = tcp()
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	return st, err
}

// handshake challenges the client and, once it has proved the secret,
// reveals the region.
func (s *server) handshake(c net.Conn) error {
	var hello [helloSize]byte
	var flags uint16
	if s.cfg.Secret != nil {
		flags = flagAuth
	}
	putHeader(hello[:], flags)
	nonce := hello[8:40]
	if err := transport.NewNonce(nonce); err != nil {
		return err
	}
	if _, err := c.Write(hello[:]); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	var auth [authSize]byte
	if _, err := io.ReadFull(c, auth[:]); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	var welcome [welcomeSize]byte
	if err := checkHeader(auth[:], "answer"); err != nil {
		st := statusBadVersion
		if binary.LittleEndian.Uint32(auth[0:]) != magic {
			st = statusBadMagic
		}
		putHeader(welcome[:], st)
		c.Write(welcome[:])
		return err
	}
	if s.cfg.Secret != nil {
		if !transport.Admit(s.cfg.Secret, nonce, auth[8:24], auth[24:56]) {
			putHeader(welcome[:], statusAuth)
			c.Write(welcome[:])
			return fmt.Errorf("%w: wrong or missing secret", transport.ErrAuth)
		}
	}
	putHeader(welcome[:], statusOK)
	le := binary.LittleEndian
	le.PutUint64(welcome[8:], uint64(s.cfg.Region.Size))
	le.PutUint64(welcome[16:], s.cfg.Region.Seed)
	if s.cfg.Region.Patterned {
		le.PutUint32(welcome[24:], flagPatterned)
	}
	if _, err := c.Write(welcome[:]); err != nil {
		return fmt.Errorf("send welcome: %w", err)
	}
	return nil
}

// serveConn answers requests until the client closes the connection,
// counting what it served in st. A client that breaks the framing (bad
// magic or version, a truncated request) gets an error reply where
// possible and ends the session with an error. Several connections may be
// served at once: the region is read-only and each has its own buffers.
func (s *server) serveConn(c net.Conn, st *transport.ServeStats, send func([]reply) error) error {
	r := bufio.NewReaderSize(c, 64<<10)
	var req [requestSize]byte
	var hdrs [maxBatch][replySize]byte
	batch := make([]reply, 0, maxBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := send(batch); err != nil {
			b := batch[0]
			return fmt.Errorf("send %d replies, the first of %d bytes at %d: %w", len(batch), b.n, b.off, err)
		}
		for _, b := range batch {
			st.BytesServed += int64(b.n)
			st.Requests++
		}
		batch = batch[:0]
		return nil
	}
	for {
		// Every request already read is answered in one batch: one
		// writev for all their replies, one turn of the connection
		// rather than one per request. The first waits for the client.
		if len(batch) > 0 && (r.Buffered() < requestSize || len(batch) == maxBatch) {
			if err := flush(); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(r, req[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the client is done
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("client sent a truncated request")
			}
			return fmt.Errorf("read request: %w", err)
		}
		q, status, fatal := decodeRequest(req[:], int64(len(s.mem)))
		if status != statusOK {
			if err := flush(); err != nil {
				return err
			}
			hdr := hdrs[0][:]
			encodeReply(hdr, status, q.tag, 0)
			if _, err := c.Write(hdr); err != nil {
				return fmt.Errorf("send reply: %w", err)
			}
			if fatal {
				return fmt.Errorf("client broke the framing (%s); closed its connection", statusText(status))
			}
			continue
		}
		hdr := hdrs[len(batch)][:]
		encodeReply(hdr, statusOK, q.tag, q.length)
		batch = append(batch, reply{hdr: hdr, off: int64(q.offset), n: int(q.length)})
	}
}

// maxBatch bounds the replies sent at once: two iovecs each, well under
// Linux's IOV_MAX of 1024.
const maxBatch = 64

// reply is one reply to send: its header and the region's n bytes at off.
type reply struct {
	hdr []byte
	off int64
	n   int
}

// writer returns how serveConn sends a batch of replies: those of at
// least sendfileMin bytes (see SendMode) with sendfile, corked, one
// after another; the others in one writev of every header and every
// block from the mapping. A batch whose replies fall on both sides is
// sent in runs, in order.
func (s *server) writer(c net.Conn) func([]reply) error {
	writev := s.writev(c)
	tc, ok := c.(*net.TCPConn)
	if !ok || s.fd < 0 {
		return writev
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return writev
	}
	from := s.t.sendfileMin(tc)
	if from < noSendfile {
		raiseSendBuffer(rc)
	}
	return splitReplies(from, s.sendfile(rc), writev)
}

// raiseSendBuffer gives a socket that sends with sendfile the largest
// send buffer the host allows (SO_SNDBUF at net.core.wmem_max, which
// Linux doubles), where that is more than autotuning would reach
// (net.ipv4.tcp_wmem's maximum). A sendfile sender does no copy, so it
// fills the buffer at once and then sleeps until half of it drains;
// with the most queued, the wire never waits for its wakeup. Measured
// through a bridge of two veths at 1 MiB, 16 in flight, 2 cores, four
// pairs side by side: 2907-3277 MB/s (median 3163) with the 8 MiB
// buffer, 2658-3135 (median 2822) with autotuning. The buffer only
// holds what the client asked for, at most its reads in flight.
func raiseSendBuffer(rc syscall.RawConn) {
	most, err := sysctlInt("/proc/sys/net/core/wmem_max", 0)
	if err != nil {
		return
	}
	auto, err := sysctlInt("/proc/sys/net/ipv4/tcp_wmem", 2)
	if err != nil || 2*most <= auto {
		return
	}
	rc.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, most)
	})
}

// sysctlInt reads the i-th number of a sysctl file.
func sysctlInt(path string, i int) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if i >= len(f) {
		return 0, fmt.Errorf("%s has %d numbers, not %d", path, len(f), i+1)
	}
	return strconv.Atoi(f[i])
}

// splitReplies sends each run of replies of at least min bytes with
// big, and each run of shorter ones with small.
func splitReplies(min int, big, small func([]reply) error) func([]reply) error {
	return func(rs []reply) error {
		for len(rs) > 0 {
			isBig := rs[0].n >= min
			i := 1
			for i < len(rs) && (rs[i].n >= min) == isBig {
				i++
			}
			send := small
			if isBig {
				send = big
			}
			if err := send(rs[:i]); err != nil {
				return err
			}
			rs = rs[i:]
		}
		return nil
	}
}

// writev returns the sender of replies in one writev from the mapping.
func (s *server) writev(c net.Conn) func([]reply) error {
	parts := make(net.Buffers, 0, 2*maxBatch)
	return func(rs []reply) error {
		parts = parts[:0]
		for _, q := range rs {
			parts = append(parts, q.hdr, s.mem[q.off:q.off+int64(q.n)])
		}
		bufs := parts // WriteTo consumes its receiver
		_, err := bufs.WriteTo(c)
		return err
	}
}

// sendfile returns the sender of replies with sendfile from the region's
// file, on the socket behind rc.
func (s *server) sendfile(rc syscall.RawConn) func([]reply) error {
	return func(rs []reply) error {
		// Corked, the batch leaves in full segments and is pushed once,
		// at the uncork, as one writev would be.
		cork := len(rs) > 1 && setCork(rc, 1) == nil
		for _, q := range rs {
			if err := sendFile(rc, s.fd, q.hdr, q.off, q.n); err != nil {
				return err
			}
		}
		if cork {
			return setCork(rc, 0)
		}
		return nil
	}
}

// setCork sets the socket's TCP_CORK: 1 holds partial segments, 0 sends
// what is held.
func setCork(rc syscall.RawConn, on int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, on)
	}); err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("setsockopt TCP_CORK", serr)
	}
	return nil
}

// sendFile sends hdr, then n bytes of file fd at off, on the socket behind
// rc. The header goes with MSG_MORE, so the kernel holds it for the data
// rather than sending a segment of its own (the socket has TCP_NODELAY);
// sendfile's own last chunk pushes both. A file that ends before off+n
// (truncated under the server) is an error, never a short reply.
func sendFile(rc syscall.RawConn, fd int, hdr []byte, off int64, n int) error {
	var opErr error
	err := rc.Write(func(sock uintptr) bool {
		for len(hdr) > 0 {
			m, err := unix.SendmsgN(int(sock), hdr, nil, nil, unix.MSG_MORE|unix.MSG_NOSIGNAL)
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket can take more
			case err == unix.EINTR:
				continue
			case err != nil:
				opErr = os.NewSyscallError("sendmsg", err)
				return true
			}
			hdr = hdr[m:]
		}
		for n > 0 {
			m, err := unix.Sendfile(int(sock), fd, &off, n)
			if m > 0 {
				n -= m
				continue
			}
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
				continue
			case err != nil:
				opErr = os.NewSyscallError("sendfile", err)
				return true
			}
			opErr = fmt.Errorf("the file ends before offset %d: was it truncated while served?", off+int64(n))
			return true
		}
		return true
	})
	if err != nil {
		return err
	}
	return opErr
}

// Close stops a running Serve (closing its listener and connection), waits
// for it to return, then unmaps the region.
func (s *server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.l.Close() // waits for Serve to let go of the region
		if err := region.Unmap(s.mem); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
		s.mem = nil
		if s.fd >= 0 {
			unix.Close(s.fd)
			s.fd = -1
		}
		if s.direct != nil {
			s.direct.close()
			s.direct = nil
		}
	})
	return s.closeErr
}

// Dial connects and authenticates.
func (t *Transport) Dial(ctx context.Context, cfg transport.ClientConfig) (transport.Client, error) {
	if cfg.BlockSize <= 0 || cfg.BlockSize > MaxBlock {
		return nil, fmt.Errorf("tcp dial: block size %d outside 1..%d", cfg.BlockSize, MaxBlock)
	}
	if cfg.QueueDepth <= 0 {
		return nil, fmt.Errorf("tcp dial: queue depth must be positive (got %d)", cfg.QueueDepth)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, results.Network, cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tcp dial %s: %w", cfg.Addr, err)
	}
	cl := &client{conn: c.(*net.TCPConn), cfg: cfg}
	if err := cl.handshake(ctx, t.handshakeTimeout()); err != nil {
		c.Close()
		return nil, fmt.Errorf("tcp handshake with %s: %w", cfg.Addr, err)
	}
	cl.handshakeEnd = time.Now()
	return cl, nil
}

type client struct {
	conn   *net.TCPConn
	cfg    transport.ClientConfig
	region transport.RegionInfo
	seq    int64 // reads issued so far, across phases: picks the next block
	// handshakeEnd is when the handshake ended: first_read_ms and
	// end_to_end_mb_s count from it, as rdma's do.
	handshakeEnd time.Time
}

func (c *client) handshake(ctx context.Context, timeout time.Duration) error {
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	err := c.handshakeIO()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.conn.SetDeadline(time.Time{})
	return err
}

func (c *client) handshakeIO() error {
	var hello [helloSize]byte
	if _, err := io.ReadFull(c.conn, hello[:]); err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	if err := checkHeader(hello[:], "hello"); err != nil {
		return err
	}
	le := binary.LittleEndian
	// A client without a secret answers anyway (with a zero mac): the
	// server refuses and logs it, and the welcome tells this side why.
	var auth [authSize]byte
	putHeader(auth[:], 0)
	rec := auth[8:24]
	le.PutUint32(rec[0:], uint32(c.cfg.BlockSize))
	le.PutUint32(rec[4:], uint32(c.cfg.QueueDepth))
	le.PutUint32(rec[8:], uint32(c.cfg.QPs))
	if len(c.cfg.Secret) > 0 {
		copy(auth[24:], transport.Answer(c.cfg.Secret, hello[8:40], rec))
	}
	if _, err := c.conn.Write(auth[:]); err != nil {
		return fmt.Errorf("send answer: %w", err)
	}
	var w [welcomeSize]byte
	if _, err := io.ReadFull(c.conn, w[:]); err != nil {
		return fmt.Errorf("read welcome: %w", err)
	}
	if err := checkHeader(w[:], "welcome"); err != nil {
		return err
	}
	switch st := le.Uint16(w[6:]); st {
	case statusOK:
	case statusAuth:
		if len(c.cfg.Secret) == 0 {
			return fmt.Errorf("%w: the server requires a secret and this client has none", transport.ErrAuth)
		}
		return fmt.Errorf("%w: the server refused this client's secret", transport.ErrAuth)
	default:
		return fmt.Errorf("server refused: %s", statusText(st))
	}
	c.region = transport.RegionInfo{
		Size:      int64(le.Uint64(w[8:])),
		Seed:      le.Uint64(w[16:]),
		Patterned: le.Uint32(w[24:])&flagPatterned != 0,
	}
	if c.region.Size <= 0 {
		return fmt.Errorf("server announced an empty region")
	}
	return nil
}

func (c *client) Region() transport.RegionInfo { return c.region }

func (c *client) Close() error { return c.conn.Close() }

// Read runs the warmup, then the measured phase. A phase ends after its
// reads (or its time) and drains every read in flight before the next
// starts, so the measured clock never includes warmup reads.
func (c *client) Read(ctx context.Context, w transport.Workload) (transport.Measurement, error) {
	var m transport.Measurement
	if w.BlockSize <= 0 || w.BlockSize > c.cfg.BlockSize {
		return m, fmt.Errorf("block size %d outside 1..%d (the size given to Dial)", w.BlockSize, c.cfg.BlockSize)
	}
	if w.QueueDepth <= 0 {
		return m, fmt.Errorf("queue depth must be positive (got %d)", w.QueueDepth)
	}
	if w.Verify && !c.region.Patterned {
		return m, errors.New("verify: the server's file holds no rdmasweep pattern (it was not made with --create), so its bytes cannot be checked")
	}
	order, err := workload.New(w.Pattern, workload.Blocks(c.region.Size, w.BlockSize), w.Seed)
	if err != nil {
		return m, fmt.Errorf("block size %d against a region of %d bytes: %w", w.BlockSize, c.region.Size, err)
	}
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	p := &phase{c: c, w: w, order: order}
	if w.Rate > 0 {
		return p.readOpen(ctx)
	}
	if w.Warmup > 0 {
		if _, err := p.run(0, w.Warmup, nil); err != nil {
			return m, ctxErr(ctx, fmt.Errorf("warmup: %w", err))
		}
	}
	total, dur := w.Total, w.Duration
	if dur > 0 {
		total = 0
	} else if total <= 0 {
		total = c.region.Size
	}
	reads := (total + int64(w.BlockSize) - 1) / int64(w.BlockSize)
	blocks := c.region.Size / int64(w.BlockSize)
	// One pass of the region from its start: no reads before (a warmup's
	// move seq) and exactly its blocks.
	onePass := dur == 0 && c.seq == 0 && reads == blocks
	h := new(results.Histogram)
	cpu := transport.StartCPU()
	tcp := tcpPhase(c.conn)
	res, err := p.run(reads, dur, h)
	used := cpu()
	tcpStats := tcp()
	if err != nil {
		return m, ctxErr(ctx, err)
	}
	var first, last *float64
	if onePass {
		first, last = c.sinceHandshake(res.start, res.first), c.sinceHandshake(res.start, time.Duration(res.seconds*float64(time.Second)))
	}
	return transport.Measurement{
		FirstReadS: first, LastReadS: last,
		Bytes:     res.reads * int64(w.BlockSize),
		Reads:     res.reads,
		Seconds:   res.seconds,
		Start:     res.start,
		Latency:   h.Summary(),
		Histogram: h,
		Intervals: res.intervals,
		Verified:  w.Verify,
		CPU:       used,
		TCP:       tcpStats,
		QPs:       1,
	}, nil
}

// tcpPhase reads c's TCP_INFO now and returns the call that reads it at
// the phase's end: the segments retransmitted since, and the round trip
// then. It gives nil where TCP_INFO cannot be read.
func tcpPhase(c *net.TCPConn) func() *counters.TCPPhase {
	before, err := counters.TCP(c)
	return func() *counters.TCPPhase {
		after, aerr := counters.TCP(c)
		if err != nil || aerr != nil {
			return nil
		}
		return &counters.TCPPhase{
			Retrans:   int64(after.TotalRetrans) - int64(before.TotalRetrans),
			DSACKDups: int64(after.DSACKDups) - int64(before.DSACKDups),
			RTT:       after.RTT,
		}
	}
}

// readOpen runs an open-loop workload: the warmup, then the measured
// phase, each on its own schedule at Workload.Rate.
func (p *phase) readOpen(ctx context.Context) (transport.Measurement, error) {
	w := p.w
	schedule := func(n int64) (*workload.Schedule, error) {
		return workload.NewSchedule(n, w.Rate, w.Arrivals, w.ArrivalSeed)
	}
	if w.Warmup > 0 {
		s, err := schedule(workload.ReadsFor(w.Warmup, w.Rate))
		if err != nil {
			return transport.Measurement{}, err
		}
		if _, _, err := p.runOpen(ctx, s, nil, nil); err != nil {
			return transport.Measurement{}, ctxErr(ctx, fmt.Errorf("warmup: %w", err))
		}
	}
	n := workload.ReadsFor(w.Duration, w.Rate)
	if w.Duration <= 0 {
		total := w.Total
		if total <= 0 {
			total = p.c.region.Size
		}
		n = (total + int64(w.BlockSize) - 1) / int64(w.BlockSize)
	}
	s, err := schedule(n)
	if err != nil {
		return transport.Measurement{}, err
	}
	h, resp := new(results.Histogram), new(results.Histogram)
	cpu := transport.StartCPU()
	res, held, err := p.runOpen(ctx, s, h, resp)
	used := cpu()
	if err != nil {
		return transport.Measurement{}, ctxErr(ctx, err)
	}
	return transport.Measurement{
		Bytes: res.reads * int64(w.BlockSize), Reads: res.reads, Seconds: res.seconds, Start: res.start,
		Latency: h.Summary(), Histogram: h, Intervals: res.intervals, Verified: w.Verify, CPU: used, QPs: 1,
		OpenLoop: &transport.OpenLoop{Response: resp, Due: n, HeldBack: held},
	}, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

type phase struct {
	c     *client
	w     transport.Workload
	order *workload.Order
}

type phaseResult struct {
	reads     int64
	seconds   float64
	start     time.Time     // wall clock at the first read issued
	first     time.Duration // the first read's completion, since start
	intervals []int64       // reads completed per Workload.Interval, when asked
}

// run issues reads (or, when dur > 0, reads until dur has passed) with up
// to QueueDepth in flight, and waits for all of them. Latencies go to h,
// and completions to intervals of Workload.Interval, when h is not nil
// (the measured phase).
//
// One goroutine does it all: it reads a reply, and sends the requests
// that refill the window only when no further whole reply is already
// buffered, so a burst of small replies costs one write. On loopback the
// profile of the earlier two-goroutine loop (a writer and a reader
// handing reads over channels) was dominated by the wakeups between them.
func (p *phase) run(reads int64, dur time.Duration, h *results.Histogram) (phaseResult, error) {
	qd := p.w.QueueDepth
	bs := p.w.BlockSize
	c := p.c
	issued := make([]time.Duration, qd) // issue time since start, by seq % qd
	req := make([]byte, requestSize*qd)
	r := bufio.NewReaderSize(c.conn, readBufSize(bs))
	lw := newLowat(c.conn)
	data := make([]byte, bs)
	var hdr [replySize]byte
	start := time.Now()
	end := start.Add(dur)
	var sent, done int64 // reads sent and completed in this phase
	var first, last time.Duration
	more := func() bool { // may another read be sent?
		if dur > 0 {
			return time.Now().Before(end)
		}
		return sent < reads
	}
	send := func() error {
		k := 0
		now := time.Since(start)
		for sent-done < int64(qd) && more() {
			seq := c.seq
			off := uint64(p.order.Block(seq)) * uint64(bs)
			request{op: opRead, tag: uint32(seq), length: uint32(bs), offset: off}.encode(req[k*requestSize:])
			issued[seq%int64(qd)] = now
			c.seq++
			sent++
			k++
		}
		if k == 0 {
			return nil
		}
		if _, err := c.conn.Write(req[:k*requestSize]); err != nil {
			return fmt.Errorf("send request: %w", err)
		}
		return nil
	}
	if err := send(); err != nil {
		return phaseResult{}, err
	}
	var intervals []int64
	for done < sent {
		seq := c.seq - (sent - done) // the oldest read in flight
		if err := p.receive(r, lw, hdr[:], data, seq); err != nil {
			return phaseResult{}, err
		}
		last = time.Since(start)
		if done == 0 {
			first = last
		}
		if h != nil {
			h.Record(uint64(last - issued[seq%int64(qd)]))
			if iv := p.w.Interval; iv > 0 {
				i := int(last / iv)
				for len(intervals) <= i {
					intervals = append(intervals, 0)
				}
				intervals[i]++
			}
		}
		done++
		if r.Buffered() < replySize+bs {
			if err := send(); err != nil {
				return phaseResult{}, err
			}
		}
	}
	return phaseResult{reads: done, seconds: last.Seconds(), start: start, first: first, intervals: intervals}, nil
}

// readBufSize is the client's read buffer for replies of bs bytes. Small
// replies are read many to a syscall through it. A large reply is read
// mostly straight into its block: bytes that pass through the buffer are
// copied twice, so it stays small next to the block.
func readBufSize(bs int) int {
	return min(max(bs/16, 4<<10), 64<<10)
}

// receive reads the reply to read seq into data and verifies it if asked.
func (p *phase) receive(r *bufio.Reader, lw *lowat, hdr, data []byte, seq int64) error {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	status, tag, length, err := decodeReply(hdr)
	if err != nil {
		return err
	}
	off := p.order.Block(seq) * int64(p.w.BlockSize)
	if status != statusOK {
		return fmt.Errorf("server refused read of %d bytes at %d: %s", p.w.BlockSize, off, statusText(status))
	}
	if tag != uint32(seq) || length != uint32(len(data)) {
		return fmt.Errorf("reply out of step: tag %d length %d, want tag %d length %d", tag, length, uint32(seq), len(data))
	}
	// Wake this reader only once the rest of the block is there, not for
	// every segment that arrives: the kernel holds the wakeup until
	// SO_RCVLOWAT bytes are queued. The mark follows what is still to
	// come, so it never waits for bytes that will not be sent.
	for rest := data; len(rest) > 0; {
		if r.Buffered() == 0 {
			lw.set(len(rest))
		}
		n, err := r.Read(rest)
		rest = rest[n:]
		if err != nil && len(rest) > 0 {
			lw.set(1)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read %d bytes at %d: %w", len(data), off, err)
		}
	}
	lw.set(1)
	if p.w.Verify {
		if bad, ok := pattern.Check(data, off, p.c.region.Seed); !ok {
			return fmt.Errorf("%w: byte at offset %d differs from the pattern", transport.ErrMismatch, bad)
		}
	}
	return nil
}

// lowat sets a socket's SO_RCVLOWAT, skipping calls that change nothing.
// Reads of a block ask for the rest of the block, and everything else for
// 1 byte, the default, so a short reply can never go unnoticed. EOF, an
// error and a deadline wake the reader whatever the mark. The mark stays
// below half the receive buffer (Linux caps it there itself since 4.18;
// older kernels would wait for bytes the window cannot admit) and below
// maxLowat.
type lowat struct {
	rc  syscall.RawConn
	cur int
}

const maxLowat = 1 << 20

func newLowat(c *net.TCPConn) *lowat {
	rc, err := c.SyscallConn()
	if err != nil {
		return &lowat{}
	}
	return &lowat{rc: rc, cur: 1}
}

func (l *lowat) set(n int) {
	n = min(max(n, 1), maxLowat)
	if l.rc == nil || n == l.cur {
		return
	}
	l.rc.Control(func(fd uintptr) {
		if n > 1 {
			buf, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
			if err != nil {
				return
			}
			n = max(min(n, buf/2), 1)
		}
		if n != l.cur && unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n) == nil {
			l.cur = n
		}
	})
}

// sinceHandshake is the seconds from the handshake's end to d after a
// phase's start.
func (c *client) sinceHandshake(start time.Time, d time.Duration) *float64 {
	s := start.Add(d).Sub(c.handshakeEnd).Seconds()
	return &s
}
