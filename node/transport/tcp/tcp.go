// Package tcp is node's transport over a plain TCP connection, for machines
// without RDMA and for tests. See wire.go for the framing.
//
// The client uses one connection and keeps up to QueueDepth requests in
// flight on it; QPs is ignored (it only means something to RDMA). The
// server answers each request with one writev of the reply header and the
// bytes straight from its read-only mapping of the region: no copy in user
// space and no allocation per request.
package tcp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rdmasweep/node/latency"
	"rdmasweep/node/pattern"
	"rdmasweep/node/region"
	"rdmasweep/node/transport"
	"rdmasweep/node/workload"
)

// DefaultHandshakeTimeout bounds one connection's handshake, so a silent
// connection cannot keep the real client out.
const DefaultHandshakeTimeout = 5 * time.Second

// Transport makes tcp servers and clients.
type Transport struct {
	// HandshakeTimeout bounds each handshake; 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

var _ transport.Transport = (*Transport)(nil)

// New returns a tcp transport with default settings.
func New() *Transport { return &Transport{} }

// Name returns "tcp".
func (*Transport) Name() string { return "tcp" }

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
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		region.Unmap(m)
		return nil, fmt.Errorf("tcp listen: %w", err)
	}
	host := cfg.Host
	if host == "" {
		host = "0.0.0.0"
	}
	l := transport.NewListener(ln.(*net.TCPListener))
	return &server{
		t: t, cfg: cfg, warn: warn, l: l, mem: m,
		ready: transport.ReadyInfo{Address: host, Port: l.Port(), Mapping: "shared-ro"},
	}, nil
}

type server struct {
	t     *Transport
	cfg   transport.ServerConfig
	warn  func(string)
	l     *transport.Listener
	mem   []byte
	ready transport.ReadyInfo

	bytes, requests int64
	closeOnce       sync.Once
	closeErr        error
}

func (s *server) Ready() transport.ReadyInfo { return s.ready }

// Serve accepts until one client authenticates or the accept timeout
// passes, then serves that client until it disconnects.
func (s *server) Serve(ctx context.Context) (transport.ServeStats, error) {
	var st transport.ServeStats
	c, release, err := s.l.Accept(ctx, s.cfg.AcceptTimeout, func(c *net.TCPConn, deadline time.Time) error {
		hsDeadline := time.Now().Add(s.t.handshakeTimeout())
		if !deadline.IsZero() && deadline.Before(hsDeadline) {
			hsDeadline = deadline
		}
		c.SetDeadline(hsDeadline)
		if err := s.handshake(c); err != nil {
			return err
		}
		return c.SetDeadline(time.Time{})
	}, func(from net.Addr, err error) {
		s.warn(fmt.Sprintf("refused connection from %s: %v", from, err))
	})
	if err != nil {
		return st, err
	}
	defer release()
	start := time.Now()
	err = s.serveConn(c)
	st = transport.ServeStats{BytesServed: s.bytes, Requests: s.requests, Seconds: time.Since(start).Seconds()}
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

// serveConn answers requests until the client closes the connection. A
// client that breaks the framing (bad magic or version, a truncated
// request) gets an error reply where possible and ends the session with an
// error.
func (s *server) serveConn(c net.Conn) error {
	r := bufio.NewReaderSize(c, 64<<10)
	var req [requestSize]byte
	var hdr [replySize]byte
	var parts [2][]byte
	var bufs net.Buffers
	for {
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
			encodeReply(hdr[:], status, q.tag, 0)
			if _, err := c.Write(hdr[:]); err != nil {
				return fmt.Errorf("send reply: %w", err)
			}
			if fatal {
				return fmt.Errorf("client broke the framing (%s); closed its connection", statusText(status))
			}
			continue
		}
		encodeReply(hdr[:], statusOK, q.tag, q.length)
		parts[0], parts[1] = hdr[:], s.mem[q.offset:q.offset+uint64(q.length)]
		bufs = parts[:]
		if _, err := bufs.WriteTo(c); err != nil {
			return fmt.Errorf("send %d bytes at %d: %w", q.length, q.offset, err)
		}
		s.bytes += int64(q.length)
		s.requests++
	}
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
	c, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("tcp dial %s: %w", cfg.Addr, err)
	}
	cl := &client{conn: c.(*net.TCPConn), cfg: cfg}
	if err := cl.handshake(ctx, t.handshakeTimeout()); err != nil {
		c.Close()
		return nil, fmt.Errorf("tcp handshake with %s: %w", cfg.Addr, err)
	}
	return cl, nil
}

type client struct {
	conn   *net.TCPConn
	cfg    transport.ClientConfig
	region transport.RegionInfo
	seq    int64 // reads issued so far, across phases: picks the next block
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
	var h latency.Histogram
	res, err := p.run(reads, dur, &h)
	if err != nil {
		return m, ctxErr(ctx, err)
	}
	return transport.Measurement{
		Bytes:    res.reads * int64(w.BlockSize),
		Reads:    res.reads,
		Seconds:  res.seconds,
		Latency:  h.Summary(),
		Verified: w.Verify,
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
	reads   int64
	seconds float64
}

// run issues reads (or, when dur > 0, reads until dur has passed) with up
// to QueueDepth in flight, and waits for all of them. Latencies go to h
// when it is not nil.
func (p *phase) run(reads int64, dur time.Duration, h *latency.Histogram) (phaseResult, error) {
	qd := p.w.QueueDepth
	bs := p.w.BlockSize
	c := p.c
	sem := make(chan struct{}, qd)     // one token per read in flight
	inflight := make(chan int64, qd)   // sequence numbers, in issue order
	issued := make([]atomic.Int64, qd) // issue time (ns since start) by seq % qd
	quit := make(chan struct{})        // closed when the reader fails
	var werr error
	start := time.Now()

	go func() { // writer
		defer close(inflight)
		buf := make([]byte, requestSize*qd)
		end := start.Add(dur)
		for n := int64(0); ; {
			if dur > 0 && !time.Now().Before(end) || dur <= 0 && n >= reads {
				return
			}
			select {
			case sem <- struct{}{}:
			case <-quit:
				return
			}
			k := 1
			for k < qd && (dur > 0 || n+int64(k) < reads) {
				select {
				case sem <- struct{}{}:
					k++
					continue
				default:
				}
				break
			}
			now := int64(time.Since(start))
			for j := range k {
				seq := c.seq + int64(j)
				off := uint64(p.order.Block(seq)) * uint64(bs)
				request{op: opRead, tag: uint32(seq), length: uint32(bs), offset: off}.encode(buf[j*requestSize:])
				issued[seq%int64(qd)].Store(now)
			}
			if _, err := c.conn.Write(buf[:k*requestSize]); err != nil {
				werr = fmt.Errorf("send request: %w", err)
				return
			}
			for j := range k {
				inflight <- c.seq + int64(j)
			}
			c.seq += int64(k)
			n += int64(k)
		}
	}()

	r := bufio.NewReaderSize(c.conn, 64<<10)
	data := make([]byte, bs)
	var hdr [replySize]byte
	var done int64
	var last time.Duration
	var rerr error
	for seq := range inflight {
		if rerr != nil {
			continue // drain so the writer can finish
		}
		rerr = p.receive(r, hdr[:], data, seq)
		if rerr != nil {
			close(quit)
			c.conn.SetDeadline(time.Unix(1, 0))
			continue
		}
		last = time.Since(start)
		if h != nil {
			h.Record(uint64(int64(last) - issued[seq%int64(qd)].Load()))
		}
		done++
		<-sem
	}
	if rerr != nil {
		return phaseResult{}, rerr
	}
	if werr != nil {
		return phaseResult{}, werr
	}
	return phaseResult{reads: done, seconds: last.Seconds()}, nil
}

// receive reads the reply to read seq into data and verifies it if asked.
func (p *phase) receive(r *bufio.Reader, hdr, data []byte, seq int64) error {
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
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("read %d bytes at %d: %w", len(data), off, err)
	}
	if p.w.Verify {
		if bad, ok := pattern.Check(data, off, p.c.region.Seed); !ok {
			return fmt.Errorf("%w: byte at offset %d differs from the pattern", transport.ErrMismatch, bad)
		}
	}
	return nil
}
