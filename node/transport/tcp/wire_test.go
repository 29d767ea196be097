package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/node/pattern"
	"rdmasweep/node/region"
	"rdmasweep/node/transport"
)

const regionSize = 1 << 20

var testSecret = []byte("wire-test-secret")

type testServer struct {
	srv   transport.Server
	addr  string
	seed  uint64
	done  chan struct{}
	err   error
	mu    sync.Mutex
	warns []string
}

func (ts *testServer) warnings() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.warns...)
}

// startServer serves the first regionSize bytes of a larger patterned
// file, so a leak past the region would show real file bytes.
func startServer(t *testing.T, tr *Transport) *testServer {
	t.Helper()
	f, err := region.Open(context.Background(), filepath.Join(t.TempDir(), "d"), region.Options{Size: 2 * regionSize, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ts := &testServer{seed: f.Seed, done: make(chan struct{})}
	srv, err := tr.Listen(context.Background(), transport.ServerConfig{
		Region:        transport.Region{File: f.File, Path: f.Path, Size: regionSize, Seed: f.Seed, Patterned: true},
		Host:          "127.0.0.1",
		AcceptTimeout: 20 * time.Second,
		Secret:        testSecret,
	}, func(m string) { ts.mu.Lock(); ts.warns = append(ts.warns, m); ts.mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts.srv = srv
	ts.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Ready().Port))
	go func() { defer close(ts.done); _, ts.err = srv.Serve(context.Background()) }()
	return ts
}

// rawAuth connects and passes the handshake by hand, returning the
// connection positioned at the first request.
func rawAuth(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var hello [helloSize]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		t.Fatalf("read hello: %v", err)
	}
	var auth [authSize]byte
	putHeader(auth[:], 0)
	copy(auth[24:], transport.Answer(testSecret, hello[8:40], auth[8:24]))
	c.Write(auth[:])
	var w [welcomeSize]byte
	if _, err := io.ReadFull(c, w[:]); err != nil {
		t.Fatalf("read welcome: %v", err)
	}
	if st := binary.LittleEndian.Uint16(w[6:]); st != statusOK {
		t.Fatalf("welcome status %s", statusText(st))
	}
	return c
}

func readReply(t *testing.T, c net.Conn) (status uint16, length uint32, data []byte) {
	t.Helper()
	var h [replySize]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		t.Fatalf("read reply: %v", err)
	}
	status, _, length, err := decodeReply(h[:])
	if err != nil {
		t.Fatal(err)
	}
	data = make([]byte, length)
	if _, err := io.ReadFull(c, data); err != nil {
		t.Fatalf("read reply data: %v", err)
	}
	return status, length, data
}

func rawRequest(op uint16, off uint64, length uint32) []byte {
	b := make([]byte, requestSize)
	request{op: op, tag: 7, length: length, offset: off}.encode(b)
	return b
}

// TestBadRequestsGetErrorReplies: within a session, a request that keeps
// the framing but asks for something wrong gets an error reply with no
// bytes, and the session goes on.
func TestBadRequestsGetErrorReplies(t *testing.T) {
	ts := startServer(t, New())
	c := rawAuth(t, ts.addr)
	for _, tc := range []struct {
		name string
		req  []byte
		want uint16
	}{
		{"past the end", rawRequest(opRead, regionSize-10, 100), statusOutOfRange},
		{"just past the end", rawRequest(opRead, regionSize, 1), statusOutOfRange},
		{"offset wraps", rawRequest(opRead, math.MaxUint64-10, 4096), statusOutOfRange},
		{"offset beyond", rawRequest(opRead, 2*regionSize, 4096), statusOutOfRange},
		{"oversized", rawRequest(opRead, 0, MaxBlock+1), statusTooLarge},
		{"unknown op", rawRequest(9, 0, 4096), statusBadOp},
	} {
		c.Write(tc.req)
		st, n, _ := readReply(t, c)
		if st != tc.want || n != 0 {
			t.Errorf("%s: reply %q with %d bytes, want %q with none", tc.name, statusText(st), n, statusText(tc.want))
		}
	}
	// The session is still good, and the last byte of the region is served.
	c.Write(rawRequest(opRead, regionSize-4096, 4096))
	st, _, data := readReply(t, c)
	if st != statusOK {
		t.Fatalf("valid request after bad ones: %s", statusText(st))
	}
	if bad, ok := pattern.Check(data, regionSize-4096, ts.seed); !ok {
		t.Fatalf("served bytes differ from the file at %d", bad)
	}
	c.Close()
	<-ts.done
	if ts.err != nil {
		t.Fatalf("serve after a clean close: %v", ts.err)
	}
}

// TestBrokenFramingEndsSession: wrong magic, wrong version or a truncated
// request get dropped; Serve reports it and never crashes.
func TestBrokenFramingEndsSession(t *testing.T) {
	wrongMagic := rawRequest(opRead, 0, 4096)
	wrongMagic[0] ^= 0xff
	wrongVersion := rawRequest(opRead, 0, 4096)
	wrongVersion[4] = 99
	for _, tc := range []struct {
		name string
		send []byte
		want uint16 // 0: no reply expected
	}{
		{"wrong magic", wrongMagic, statusBadMagic},
		{"wrong version", wrongVersion, statusBadVersion},
		{"truncated", rawRequest(opRead, 0, 4096)[:10], 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, New())
			c := rawAuth(t, ts.addr)
			c.Write(tc.send)
			if tc.want != 0 {
				if st, n, _ := readReply(t, c); st != tc.want || n != 0 {
					t.Errorf("reply %q with %d bytes, want %q", statusText(st), n, statusText(tc.want))
				}
				if _, err := c.Read(make([]byte, 1)); err == nil {
					t.Error("connection still open after the framing broke")
				}
			} else {
				c.(*net.TCPConn).CloseWrite()
			}
			select {
			case <-ts.done:
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not end")
			}
			if ts.err == nil {
				t.Error("Serve reported no error for a client that broke the framing")
			}
		})
	}
}

// TestBadHandshakesKeepWaiting: connections that fail the handshake in any
// way are dropped and reported, and the real client still gets in.
func TestBadHandshakesKeepWaiting(t *testing.T) {
	ts := startServer(t, &Transport{HandshakeTimeout: 300 * time.Millisecond})
	send := func(b []byte, closeAfter bool) {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var hello [helloSize]byte
		io.ReadFull(c, hello[:])
		c.Write(b)
		if closeAfter {
			c.Close()
			return
		}
		io.Copy(io.Discard, c) // until the server drops us
	}
	good := func() []byte { b := make([]byte, authSize); putHeader(b, 0); return b }
	magicBad := good()
	magicBad[1] ^= 0xff
	versionBad := good()
	versionBad[4] = 2
	send(magicBad, false)
	send(versionBad, false)
	send(good(), false)                            // zero mac: no secret
	send(good()[:20], true)                        // truncated
	send(bytes.Repeat([]byte{0xAB}, 1<<16), false) // oversized garbage
	// A silent connection holds nothing: the real client's handshake runs
	// beside it (transport.Listener).
	silent, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	start := time.Now()
	cl, err := New().Dial(context.Background(), transport.ClientConfig{Addr: ts.addr, Secret: testSecret, QPs: 1, QueueDepth: 2, BlockSize: 4096})
	if err != nil {
		t.Fatalf("real client after bad ones: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("real client waited %v behind a silent connection", el)
	}
	m, err := cl.Read(context.Background(), transport.Workload{BlockSize: 4096, QueueDepth: 2, Pattern: "sequential", Total: regionSize, Verify: true})
	if err != nil || !m.Verified {
		t.Fatalf("real client read: %v", err)
	}
	cl.Close()
	<-ts.done
	if ts.err != nil {
		t.Fatalf("serve: %v", ts.err)
	}
	w := ts.warnings()
	if len(w) < 5 {
		t.Errorf("%d warnings for 5 refused connections: %q", len(w), w)
	}
	for _, m := range w {
		if !strings.HasPrefix(m, "refused connection from ") {
			t.Errorf("warning %q does not say a connection was refused", m)
		}
	}
}

func TestNoSecretNoRegion(t *testing.T) {
	ts := startServer(t, New())
	_, err := New().Dial(context.Background(), transport.ClientConfig{Addr: ts.addr, QPs: 1, QueueDepth: 1, BlockSize: 4096})
	if !errors.Is(err, transport.ErrAuth) || !strings.Contains(err.Error(), "requires a secret") {
		t.Fatalf("dial without a secret: %v", err)
	}
	// A wrong answer learns nothing about the region.
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var hello [helloSize]byte
	io.ReadFull(c, hello[:])
	if binary.LittleEndian.Uint16(hello[6:])&flagAuth == 0 {
		t.Error("hello does not say authentication is required")
	}
	var auth [authSize]byte
	putHeader(auth[:], 0)
	copy(auth[24:], transport.Answer([]byte("guess"), hello[8:40], auth[8:24]))
	c.Write(auth[:])
	var w [welcomeSize]byte
	if _, err := io.ReadFull(c, w[:]); err != nil {
		t.Fatal(err)
	}
	if st := binary.LittleEndian.Uint16(w[6:]); st != statusAuth || !bytes.Equal(w[8:], make([]byte, welcomeSize-8)) {
		t.Errorf("refusal %x: want status auth and no region size or seed", w)
	}
}
