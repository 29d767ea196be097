// Package transporttest is the conformance suite every node transport
// passes: real files, a real server and client, and checks of what a user
// relies on (bytes come from the file, verify catches a flipped byte, the
// secret keeps others out, timeouts and cancellation stop promptly).
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/node/region"
	"rdmasweep/node/transport"
	"rdmasweep/node/workload"
)

// Option adjusts how the suite drives a transport.
type Option func(*config)

type config struct {
	host         string
	rdma         transport.RDMA
	registration string
}

// WithHost makes servers listen on, and clients dial, host (default
// 127.0.0.1). RDMA needs the address of an RDMA-capable interface.
func WithHost(host string) Option { return func(c *config) { c.host = host } }

// WithRDMA passes RDMA settings to both sides.
func WithRDMA(r transport.RDMA) Option { return func(c *config) { c.rdma = r } }

// WithRegistration sets the server's registration ("pinned" or "odp").
func WithRegistration(reg string) Option { return func(c *config) { c.registration = reg } }

// Run runs the suite against tr.
func Run(t *testing.T, tr transport.Transport, opts ...Option) {
	cfg := config{host: "127.0.0.1", rdma: transport.RDMA{GIDIndex: -1}, registration: "pinned"}
	for _, o := range opts {
		o(&cfg)
	}
	s := &suite{tr: tr, cfg: cfg}
	t.Run("ReadVerify", s.readVerify)
	t.Run("RandomAndDuration", s.randomAndDuration)
	t.Run("FlippedByte", s.flippedByte)
	t.Run("RegionBounds", s.regionBounds)
	t.Run("Unpatterned", s.unpatterned)
	t.Run("Secret", s.secret)
	t.Run("IdleConnections", s.idleConnections)
	t.Run("AcceptTimeout", s.acceptTimeout)
	t.Run("CancelServe", s.cancelServe)
	t.Run("CancelRead", s.cancelRead)
	t.Run("CloseWhileServing", s.closeWhileServing)
	t.Run("ManyClients", s.manyClients)
	t.Run("OpenLoop", s.openLoop)
	t.Run("OnePassTimes", s.onePassTimes)
}

type suite struct {
	tr  transport.Transport
	cfg config
}

const block = 64 << 10

// file makes a patterned file of size bytes in a temp dir.
func file(t *testing.T, size int64) *region.File {
	t.Helper()
	f, err := region.Open(context.Background(), filepath.Join(t.TempDir(), "region.dat"), region.Options{Size: size, Create: true, Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if !f.Patterned || !f.Created {
		t.Fatalf("fresh file: patterned %v created %v, want both", f.Patterned, f.Created)
	}
	return f
}

func regionOf(f *region.File) transport.Region {
	return transport.Region{File: f.File, Path: f.Path, Size: f.Size, Seed: f.Seed, Patterned: f.Patterned, Writable: f.Writable}
}

// running is a listening server whose Serve runs in the background.
type running struct {
	srv   transport.Server
	addr  string
	done  chan struct{}
	stats transport.ServeStats
	err   error

	mu    sync.Mutex
	warns []string
}

func (r *running) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warns...)
}

// wait returns Serve's outcome, failing t if it takes longer than d.
func (r *running) wait(t *testing.T, d time.Duration) (transport.ServeStats, error) {
	t.Helper()
	select {
	case <-r.done:
		return r.stats, r.err
	case <-time.After(d):
		t.Fatalf("Serve did not return within %s", d)
		return transport.ServeStats{}, nil
	}
}

func (s *suite) serve(t *testing.T, ctx context.Context, reg transport.Region, secret []byte, accept time.Duration) *running {
	t.Helper()
	r := &running{done: make(chan struct{})}
	srv, err := s.tr.Listen(ctx, transport.ServerConfig{
		Region: reg, Host: s.cfg.host, AcceptTimeout: accept, Secret: secret,
		Registration: s.cfg.registration, RDMA: s.cfg.rdma,
	}, func(m string) { r.mu.Lock(); r.warns = append(r.warns, m); r.mu.Unlock() })
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	info := srv.Ready()
	if info.Port <= 0 || info.Port > 65535 {
		t.Fatalf("Ready().Port = %d, want a real port", info.Port)
	}
	r.srv, r.addr = srv, fmt.Sprintf("%s:%d", s.cfg.host, info.Port)
	go func() {
		defer close(r.done)
		r.stats, r.err = srv.Serve(ctx)
	}()
	return r
}

func (s *suite) dial(ctx context.Context, addr string, secret []byte, bs, qd int) (transport.Client, error) {
	return s.tr.Dial(ctx, transport.ClientConfig{Addr: addr, Secret: secret, QPs: 1, QueueDepth: qd, BlockSize: bs, RDMA: s.cfg.rdma})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var secretA = []byte("0123456789abcdef0123456789abcdef")

func (s *suite) readVerify(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 64*block)
	srv := s.serve(t, ctx, regionOf(f), secretA, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, secretA, block, 8)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if got := cl.Region(); got.Size != f.Size || got.Seed != f.Seed || !got.Patterned {
		t.Fatalf("client learned %+v, want size %d seed %d patterned", got, f.Size, f.Seed)
	}
	total := 3 * f.Size // several passes over the region
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 8, Pattern: "sequential", Total: total, Verify: true})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if m.Bytes != total || m.Reads != total/block || !m.Verified {
		t.Errorf("measured %d bytes in %d reads, verified %v; want %d bytes in %d reads, verified", m.Bytes, m.Reads, m.Verified, total, total/block)
	}
	checkSane(t, m)
	cl.Close()
	st, err := srv.wait(t, 10*time.Second)
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	if st.BytesServed < total || st.Requests < total/block || st.Seconds <= 0 {
		t.Errorf("server stats %+v, want at least %d bytes in %d requests", st, total, total/block)
	}
	if c := st.CPU; c.WallS < st.Seconds*0.9 || c.WallS > st.Seconds+1 || c.UserS < 0 || c.SysS < 0 {
		t.Errorf("server cpu %+v over a session of %v s", c, st.Seconds)
	}
}

// checkSane checks the figures a user reads off a result.
func checkSane(t *testing.T, m transport.Measurement) {
	t.Helper()
	l := m.Latency
	if m.Seconds <= 0 {
		t.Errorf("seconds = %v, want > 0", m.Seconds)
	}
	if !(l.AvgUs > 0 && l.P50Us > 0 && l.P50Us <= l.P99Us && l.P99Us <= l.P999Us && l.P999Us <= l.MaxUs) {
		t.Errorf("latencies not ordered 0 < p50 <= p99 <= p99.9 <= max: %+v", l)
	}
	if l.MaxUs > m.Seconds*1e6*1.01 {
		t.Errorf("max latency %v µs exceeds the whole run of %v s", l.MaxUs, m.Seconds)
	}
	if l.AvgUs > l.MaxUs*1.01 {
		t.Errorf("average latency %v µs above max %v µs", l.AvgUs, l.MaxUs)
	}
	// The CPU covers at least the measured phase (rdma's also covers the
	// warmup), and some CPU was spent reading.
	if c := m.CPU; c.WallS < m.Seconds*0.9 || c.UserS < 0 || c.SysS < 0 || c.UserS+c.SysS <= 0 {
		t.Errorf("cpu %+v over a measured phase of %v s", c, m.Seconds)
	}
}

func (s *suite) randomAndDuration(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 32*block)
	srv := s.serve(t, ctx, regionOf(f), nil, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, nil, block, 4)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "random", Total: f.Size, Verify: true, Seed: 5, Warmup: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("random read: %v", err)
	}
	if m.Bytes != f.Size || !m.Verified {
		t.Errorf("random: %d bytes verified %v, want %d verified (warmup must not count)", m.Bytes, m.Verified, f.Size)
	}
	checkSane(t, m)
	const d = 300 * time.Millisecond
	m, err = cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "sequential", Duration: d})
	if err != nil {
		t.Fatalf("duration read: %v", err)
	}
	if m.Seconds < d.Seconds()*0.9 || m.Seconds > d.Seconds()+2 || m.Verified {
		t.Errorf("duration %v: measured %v s, verified %v; want about %v s, not verified", d, m.Seconds, m.Verified, d.Seconds())
	}
	if m.Reads <= 0 || m.Bytes != m.Reads*block {
		t.Errorf("duration read: %d bytes in %d reads", m.Bytes, m.Reads)
	}
}

func (s *suite) flippedByte(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 16*block)
	const at = 5*block + 1234
	w, err := os.OpenFile(f.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	w.ReadAt(b[:], at)
	b[0] ^= 0x40
	if _, err := w.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	w.Close()
	srv := s.serve(t, ctx, regionOf(f), nil, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, nil, block, 4)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()
	_, err = cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "sequential", Total: f.Size, Verify: true})
	if !errors.Is(err, transport.ErrMismatch) {
		t.Fatalf("read of a file with a flipped byte: %v, want ErrMismatch", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(at)) {
		t.Errorf("mismatch error %q does not name offset %d", err, at)
	}
}

// regionBounds serves the first part of a larger file whose size is not a
// whole number of blocks: reads stay inside the region.
func (s *suite) regionBounds(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 20*block)
	reg := regionOf(f)
	reg.Size = 7*block + block/2
	srv := s.serve(t, ctx, reg, nil, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, nil, block, 2)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if cl.Region().Size != reg.Size {
		t.Errorf("client sees %d bytes, want the region's %d", cl.Region().Size, reg.Size)
	}
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 2, Pattern: "random", Total: 7 * block, Verify: true, Seed: 9})
	if err != nil || m.Bytes != 7*block {
		t.Errorf("read of the whole blocks: %d bytes, %v", m.Bytes, err)
	}
	cl.Close()
	st, err := srv.wait(t, 10*time.Second)
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	if st.BytesServed != 7*block {
		t.Errorf("server sent %d bytes, want exactly the %d asked inside the region", st.BytesServed, 7*block)
	}
	// A block larger than the whole region cannot be read at all.
	srv = s.serve(t, ctx, reg, nil, 10*time.Second)
	cl, err = s.dial(ctx, srv.addr, nil, 16*block, 1)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if _, err := cl.Read(ctx, transport.Workload{BlockSize: 16 * block, QueueDepth: 1, Pattern: "sequential", Total: 16 * block}); err == nil {
		t.Error("reading a block larger than the region succeeded")
	}
	cl.Close()
	if st, _ := srv.wait(t, 10*time.Second); st.BytesServed != 0 {
		t.Errorf("server sent %d bytes for a block larger than its region", st.BytesServed)
	}
}

func (s *suite) unpatterned(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 8*block)
	reg := regionOf(f)
	reg.Patterned, reg.Seed = false, 0
	srv := s.serve(t, ctx, reg, nil, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, nil, block, 2)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()
	if cl.Region().Patterned {
		t.Error("client believes an unpatterned region is patterned")
	}
	_, err = cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 2, Pattern: "sequential", Total: f.Size, Verify: true})
	if err == nil || errors.Is(err, transport.ErrMismatch) || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("verify against an unpatterned file: %v, want a clear error about the pattern", err)
	}
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 2, Pattern: "sequential", Total: f.Size})
	if err != nil || m.Bytes != f.Size || m.Verified {
		t.Errorf("plain read of an unpatterned file: %+v, %v", m, err)
	}
}

func (s *suite) secret(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 8*block)
	srv := s.serve(t, ctx, regionOf(f), secretA, 20*time.Second)
	for _, bad := range [][]byte{[]byte("the wrong secret, same length!!!"), nil} {
		cl, err := s.dial(ctx, srv.addr, bad, block, 1)
		if err == nil {
			cl.Close()
			t.Fatalf("client with secret %q was let in", bad)
		}
		if !errors.Is(err, transport.ErrAuth) {
			t.Errorf("refused client got %v, want ErrAuth", err)
		}
	}
	cl, err := s.dial(ctx, srv.addr, secretA, block, 1)
	if err != nil {
		t.Fatalf("the real client, after two refused ones: %v", err)
	}
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 1, Pattern: "sequential", Total: f.Size, Verify: true})
	if err != nil || !m.Verified {
		t.Fatalf("read by the real client: %v", err)
	}
	cl.Close()
	if _, err := srv.wait(t, 10*time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
	// A refused client learns of it from the handshake's last message,
	// and may be gone before the server's handshake has reported it;
	// Close waits for every handshake, so by then both are reported, as
	// they are before node serve exits.
	srv.srv.Close()
	if w := srv.warnings(); len(w) < 2 {
		t.Errorf("refused handshakes reported %d warnings, want 2: %q", len(w), w)
	}
}

// idleConnections: connections to the data port that never say a word
// (anyone who can reach it can open them) do not fail the point: the real
// client behind them is admitted and served.
func (s *suite) idleConnections(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 8*block)
	srv := s.serve(t, ctx, regionOf(f), secretA, 50*time.Second)
	for range 4 {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatalf("idle connection: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	cl, err := s.dial(ctx, srv.addr, secretA, block, 1)
	if err != nil {
		t.Fatalf("the real client, behind 4 idle connections: %v", err)
	}
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 1, Pattern: "sequential", Total: f.Size, Verify: true})
	if err != nil || !m.Verified {
		t.Fatalf("read by the real client: %v", err)
	}
	cl.Close()
	if _, err := srv.wait(t, 10*time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func (s *suite) acceptTimeout(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 4*block)
	const d = 300 * time.Millisecond
	start := time.Now()
	srv := s.serve(t, ctx, regionOf(f), nil, d)
	_, err := srv.wait(t, 10*time.Second)
	if err == nil {
		t.Fatal("Serve with no client returned no error")
	}
	if el := time.Since(start); el < d {
		t.Errorf("gave up after %v, before the accept timeout %v", el, d)
	}
}

func (s *suite) cancelServe(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	f := file(t, 4*block)
	srv := s.serve(t, ctx, regionOf(f), nil, time.Minute)
	time.Sleep(100 * time.Millisecond)
	cancel()
	if _, err := srv.wait(t, 3*time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Serve returned %v, want context.Canceled", err)
	}
}

// Close while Serve waits for a client ends Serve with an error, and a
// Serve after Close fails at once: the region is gone, nothing may touch it.
func (s *suite) closeWhileServing(t *testing.T) {
	f := file(t, 4*block)
	srv := s.serve(t, testCtx(t), regionOf(f), nil, time.Minute)
	time.Sleep(100 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- srv.srv.Close() }()
	if _, err := srv.wait(t, 3*time.Second); err == nil {
		t.Errorf("Serve ended by Close returned no error")
	}
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := srv.srv.Serve(testCtx(t)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve after Close = %v, want net.ErrClosed", err)
	}
	if err := srv.srv.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func (s *suite) cancelRead(t *testing.T) {
	f := file(t, 16*block)
	srv := s.serve(t, testCtx(t), regionOf(f), nil, 10*time.Second)
	ctx, cancel := context.WithCancel(testCtx(t))
	cl, err := s.dial(ctx, srv.addr, nil, block, 4)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "sequential", Duration: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read returned %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("cancelled read took %v to return", el)
	}
}

// manyClients is fan-in: one server, one region, several clients at once,
// as node serve --clients N runs them: Serve called once per client, all
// together. Every client reads verified bytes, and each Serve accounts for
// its own client alone.
func (s *suite) manyClients(t *testing.T) {
	const n = 3
	ctx := testCtx(t)
	f := file(t, 64*block)
	srv := s.serve(t, ctx, regionOf(f), secretA, 20*time.Second) // the first Serve
	type serve struct {
		stats transport.ServeStats
		err   error
	}
	serves := make(chan serve, n)
	for range n - 1 {
		go func() {
			st, err := srv.srv.Serve(ctx)
			serves <- serve{st, err}
		}()
	}
	errs := make(chan error, n)                       // the clients'; closed once they are done
	totals := []int64{4 * f.Size, 2 * f.Size, f.Size} // each client reads its own amount
	var wg sync.WaitGroup
	for _, total := range totals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := s.dial(ctx, srv.addr, secretA, block, 4)
			if err != nil {
				errs <- fmt.Errorf("dial: %w", err)
				return
			}
			defer cl.Close()
			m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "random", Total: total, Verify: true})
			switch {
			case err != nil:
				errs <- fmt.Errorf("read: %w", err)
			case m.Bytes != total || !m.Verified:
				errs <- fmt.Errorf("read %d bytes, verified %v; want %d verified", m.Bytes, m.Verified, total)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st, err := srv.wait(t, 20*time.Second)
	serves <- serve{st, err}
	served := map[int64]bool{}
	for range n {
		sv := <-serves
		served[sv.stats.BytesServed] = true
		if sv.err != nil {
			t.Error(sv.err)
		}
	}
	for _, total := range totals {
		if !served[total] {
			t.Errorf("no Serve accounted for exactly its client's %d bytes (served: %v)", total, served)
		}
	}
}

// openLoop reads at an offered rate, poisson, after a warmup at the same
// rate: the measured phase has the reads due in its duration, each
// verified and each timed twice (service from the post, response from
// the due time, never shorter), it cannot end before its last read fell
// due, and a closed-loop read on the same client reports no open loop.
func (s *suite) openLoop(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 32*block)
	srv := s.serve(t, ctx, regionOf(f), nil, 10*time.Second)
	cl, err := s.dial(ctx, srv.addr, nil, block, 4)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()
	const rate, d = 200.0, 300 * time.Millisecond // reads per second
	m, err := cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "sequential", Duration: d, Verify: true,
		Warmup: 50 * time.Millisecond, Rate: rate, Arrivals: "poisson", ArrivalSeed: 7})
	if err != nil {
		t.Fatalf("open-loop read: %v", err)
	}
	ol := m.OpenLoop
	due := workload.ReadsFor(d, rate)
	if ol == nil || ol.Due != due || m.Reads != due || !m.Verified {
		t.Fatalf("open loop %+v, %d reads, verified %v; want %d due and read, verified", ol, m.Reads, m.Verified, due)
	}
	checkSane(t, m)
	if ol.Response == nil || ol.Response.N != uint64(due) || m.Latency.N != due {
		t.Errorf("%d response and %d service latencies of %d reads: an open loop times every read both ways", ol.Response.N, m.Latency.N, due)
	}
	if ol.HeldBack < 0 || ol.HeldBack > due {
		t.Errorf("%d of %d held back", ol.HeldBack, due)
	}
	if r := ol.Response.Summary(); r.MaxUs < m.Latency.MaxUs || r.SumUs < m.Latency.SumUs {
		t.Errorf("response latencies (max %v µs, sum %v) under service ones (max %v, sum %v): a read answers after it was posted, and it is posted at or after its due time",
			r.MaxUs, r.SumUs, m.Latency.MaxUs, m.Latency.SumUs)
	}
	if last := float64(due-1) / rate; m.Seconds < last {
		t.Errorf("the phase ended after %v s, before its last read fell due at %v s: a read was posted early", m.Seconds, last)
	}
	m, err = cl.Read(ctx, transport.Workload{BlockSize: block, QueueDepth: 4, Pattern: "sequential", Total: 8 * block})
	if err != nil || m.OpenLoop != nil {
		t.Errorf("closed-loop read after an open one: %v, open loop %+v; want none", err, m.OpenLoop)
	}
}

// onePassTimes: a read of the whole region once from its start, with no
// warmup, times its first and its last read from the handshake's end
// (first_read_ms and end_to_end_mb_s), first before last; two passes, or
// a warmup before, time neither.
func (s *suite) onePassTimes(t *testing.T) {
	ctx := testCtx(t)
	f := file(t, 64*block)
	for _, c := range []struct {
		name string
		w    transport.Workload
		want bool
	}{
		{"one pass", transport.Workload{BlockSize: block, QueueDepth: 8, Pattern: "sequential", Verify: true}, true},
		{"two passes", transport.Workload{BlockSize: block, QueueDepth: 8, Pattern: "sequential", Total: 2 * f.Size}, false},
		{"after a warmup", transport.Workload{BlockSize: block, QueueDepth: 8, Pattern: "sequential", Warmup: 50 * time.Millisecond}, false},
	} {
		srv := s.serve(t, ctx, regionOf(f), secretA, 10*time.Second)
		cl, err := s.dial(ctx, srv.addr, secretA, block, 8)
		if err != nil {
			t.Fatalf("%s: dial: %v", c.name, err)
		}
		m, err := cl.Read(ctx, c.w)
		cl.Close()
		if err != nil {
			t.Fatalf("%s: read: %v", c.name, err)
		}
		if got := m.FirstReadS != nil && m.LastReadS != nil; got != c.want {
			t.Errorf("%s: first %v, last %v; want both timed: %v", c.name, m.FirstReadS, m.LastReadS, c.want)
			continue
		}
		if c.want && !(*m.FirstReadS > 0 && *m.FirstReadS <= *m.LastReadS) {
			t.Errorf("%s: first read %.6f s, last %.6f s after the handshake; want 0 < first ≤ last", c.name, *m.FirstReadS, *m.LastReadS)
		}
	}
}
