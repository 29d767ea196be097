package rdma

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"rdmasweep/node/transport"
)

// FuzzDecodeEndpoint feeds the connection record decoder arbitrary bytes.
// What it accepts must be a record encode gives back byte for byte, within
// the limits a peer may claim; what it refuses must be a protocol error.
// The committed corpus (testdata/fuzz/FuzzDecodeEndpoint) runs as a plain
// test, with or without cgo.
func FuzzDecodeEndpoint(f *testing.F) {
	f.Add(sampleEndpoint(1).encode())
	f.Add(sampleEndpoint(3).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		e, rest, err := decodeEndpoint(b)
		if err != nil {
			if !errors.Is(err, errProtocol) {
				t.Fatalf("decode error %v does not wrap errProtocol", err)
			}
			return
		}
		if n := len(e.QPs); n < 1 || n > maxQPs {
			t.Fatalf("accepted %d QPs, outside 1..%d", n, maxQPs)
		}
		if e.MTU < 1 || e.MTU > 5 {
			t.Fatalf("accepted mtu code %d", e.MTU)
		}
		used := b[:len(b)-len(rest)]
		if !bytes.Equal(e.encode(), used) {
			t.Fatalf("decoded %x as %+v, which encodes as %x", used, e, e.encode())
		}
	})
}

// FuzzServerHandshake sends arbitrary bytes, after the challenge, to the
// server's side of the handshake under a secret. Since the bytes cannot
// hold the MAC of a nonce they never saw, the server must refuse every one
// of them: prepare no QPs, send no welcome (the region's address, rkey and
// seed), and answer with at most a refusal, without panicking or hanging.
func FuzzServerHandshake(f *testing.F) {
	var hello bytes.Buffer
	writeMsg(&hello, kindHello, append(sampleEndpoint(2).encode(), make([]byte, sha256.Size)...))
	f.Add(hello.Bytes())
	f.Add(hello.Bytes()[:headerLen+5])
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err, prepared := serverAgainst(t, []byte("0123456789abcdef0123456789abcdef"), b)
		if err == nil || prepared {
			t.Fatalf("server accepted %x (err %v, prepared %v)", b, err, prepared)
		}
		checkNoWelcome(t, out)
	})
}

// serverAgainst runs serverHandshake against a peer that reads the
// challenge, sends b and closes its side for writing. It returns what the
// server sent after the challenge, its error and whether it prepared QPs.
func serverAgainst(t *testing.T, secret, b []byte) (after []byte, err error, prepared bool) {
	t.Helper()
	srv, cli := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	region := regionRecord{Addr: 0x7f0000001000, Length: 8 << 20, Seed: 0xfeed, Patterned: true, MRSize: 8 << 20, RKeys: []uint32{0x1234}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var sess serverSession
		sess, err = serverHandshake(ctx, srv, secret, region, func(endpoint) (serverSession, error) {
			prepared = true
			return &fakeSession{ep: sampleEndpoint(1)}, nil
		})
		if sess != nil {
			sess.close()
		}
		srv.Close()
	}()
	cli.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, cerr := readMsg(cli, kindChallenge); cerr != nil {
		t.Fatalf("challenge: %v", cerr)
	}
	cli.Write(b) // the server may have stopped reading; that is its right
	cli.CloseWrite()
	after, _ = io.ReadAll(cli)
	<-done
	return after, err, prepared
}

// tcpPair returns the two ends of a loopback TCP connection: unlike
// net.Pipe it buffers, so a server that stops reading early does not
// stall the peer's write.
func tcpPair(t *testing.T) (server net.Conn, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s, c.(*net.TCPConn)
}

// checkNoWelcome fails t unless out is empty or one refusal frame.
func checkNoWelcome(t *testing.T, out []byte) string {
	t.Helper()
	if len(out) == 0 {
		return ""
	}
	kind, body, err := readMsg(bytes.NewReader(out), kindRefusal, kindWelcome)
	if err != nil || kind != kindRefusal {
		t.Fatalf("server answered a refused hello with %x (%v), want nothing or a refusal", out, err)
	}
	if n := headerLen + len(body); n != len(out) {
		t.Fatalf("server sent %d bytes after its refusal", len(out)-n)
	}
	return string(body)
}

// TestServerHandshakeRefusesMalformed sends the server's handshake each kind
// of bad hello. Each is refused with the problem named on the server and,
// where the hello was malformed rather than cut short, in a refusal to the
// peer; no QPs are prepared and no region is sent.
func TestServerHandshakeRefusesMalformed(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	frame := func(magic string, version, kind byte, n int, body []byte) []byte {
		b := append([]byte(magic), version, kind)
		b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		return append(b, body...)
	}
	ep := sampleEndpoint(2).encode()
	hello := append(append([]byte(nil), ep...), make([]byte, sha256.Size)...)
	with := func(i int, v ...byte) []byte {
		b := append([]byte(nil), hello...)
		copy(b[i:], v)
		return b
	}
	for _, c := range []struct {
		name    string
		send    []byte
		want    string // in the server's error
		refusal bool   // the peer is told why
	}{
		{"empty", nil, "EOF", false},
		{"truncated header", frame(wireMagic, wireVersion, kindHello, len(hello), nil)[:7], "EOF", false},
		{"truncated body", frame(wireMagic, wireVersion, kindHello, len(hello), hello[:20]), "EOF", false},
		{"oversized", frame(wireMagic, wireVersion, kindHello, maxBody+1, hello), "over", true},
		{"huge length", frame(wireMagic, wireVersion, kindHello, 1<<31, nil), "over", true},
		{"wrong magic", frame("HTTP", wireVersion, kindHello, len(hello), hello), "bad magic", true},
		{"wrong version", frame(wireMagic, wireVersion+1, kindHello, len(hello), hello), "this node 5", true},
		{"wrong kind", frame(wireMagic, wireVersion, kindBye, 16, make([]byte, 16)), "got bye", true},
		{"unknown kind", frame(wireMagic, wireVersion, 99, 0, nil), "got kind 99", true},
		{"short endpoint", frame(wireMagic, wireVersion, kindHello, 10, hello[:10]), "shorter than 22", true},
		{"zero QPs", frame(wireMagic, wireVersion, kindHello, 22+32, append(with(20, 0, 0)[:22], make([]byte, 32)...)), "0 QPs", true},
		{"too many QPs", frame(wireMagic, wireVersion, kindHello, len(hello), with(20, 0xff, 0xff)), "65535 QPs", true},
		{"QP list cut", frame(wireMagic, wireVersion, kindHello, len(hello), with(20, 0, 9)), "9 QPs but", true},
		{"mtu 0", frame(wireMagic, wireVersion, kindHello, len(hello), with(18, 0)), "mtu code 0", true},
		{"mtu 6", frame(wireMagic, wireVersion, kindHello, len(hello), with(18, 6)), "mtu code 6", true},
		{"short mac", frame(wireMagic, wireVersion, kindHello, len(hello)-1, hello[:len(hello)-1]), "31 bytes after the endpoint", true},
		{"wrong mac", frame(wireMagic, wireVersion, kindHello, len(hello), hello), "authentication failed", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err, prepared := serverAgainst(t, secret, c.send)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Errorf("server: %v, want an error with %q", err, c.want)
			}
			if prepared {
				t.Error("server prepared QPs for a refused hello")
			}
			msg := checkNoWelcome(t, out)
			if c.refusal && msg == "" {
				t.Error("the peer was not told why it was refused")
			}
			if msg != "" && !bytes.Contains([]byte(msg), []byte(c.want)) {
				t.Errorf("refusal %q does not name the problem %q", msg, c.want)
			}
		})
	}
	// The same hello with its MAC right is served: the cases above fail for
	// what they changed, not for something they share.
	srv, cli := tcpPair(t)
	go serverHandshake(context.Background(), srv, secret, regionRecord{Length: 1, MRSize: 1, RKeys: []uint32{1}}, func(endpoint) (serverSession, error) {
		return &fakeSession{ep: sampleEndpoint(2)}, nil
	})
	if _, reg, err := clientHandshake(context.Background(), cli, secret, sampleEndpoint(2)); err != nil || len(reg.RKeys) != 1 || reg.RKeys[0] != 1 {
		t.Fatalf("well-formed hello: %v", err)
	}
}

// A client that ends after the handshake without its bye fails the server,
// with the client's reason when it sent one; a bye gives the counts.
func TestServerSeesClientEnd(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		name  string
		end   func(c *net.TCPConn)
		want  string
		bytes int64
	}{
		{"bye", func(c *net.TCPConn) { writeMsg(c, kindBye, byeBody(3<<20, 3)) }, "", 3 << 20},
		{"abort", func(c *net.TCPConn) {
			sendAbort(c, errors.New("queue_depth 64 over 1 QP(s)\nhint: raise client.qps"))
		}, "failed after the handshake: queue_depth 64 over 1 QP(s) hint: raise client.qps", 0},
		{"disconnect", func(c *net.TCPConn) {}, "disconnected without a bye", 0},
		{"reset", func(c *net.TCPConn) { c.SetLinger(0) }, "disconnected without a bye", 0},
		{"short bye", func(c *net.TCPConn) { writeMsg(c, kindBye, []byte{1}) }, "bye of 1 bytes", 0},
		{"garbage", func(c *net.TCPConn) { c.Write([]byte("GET / HTTP/1.0\r\n\r\n")) }, "bad magic", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli := tcpPair(t)
			type end struct {
				n   int64
				err error
			}
			got := make(chan end, 1)
			go func() {
				sess, err := serverHandshake(context.Background(), srv, secret, regionRecord{Length: 1, MRSize: 1, RKeys: []uint32{1}}, func(endpoint) (serverSession, error) {
					return &fakeSession{ep: sampleEndpoint(1)}, nil
				})
				if err != nil {
					got <- end{err: err}
					return
				}
				defer sess.close()
				n, _, err := readEnd(srv, nil)
				got <- end{n, err}
			}()
			if _, _, err := clientHandshake(context.Background(), cli, secret, sampleEndpoint(1)); err != nil {
				t.Fatal(err)
			}
			c.end(cli)
			cli.Close()
			r := <-got
			switch {
			case c.want == "" && (r.err != nil || r.n != c.bytes):
				t.Errorf("server: %d bytes, %v; want %d, no error", r.n, r.err, c.bytes)
			case c.want != "" && (r.err == nil || !errors.Is(r.err, errClientFailed) || !bytes.Contains([]byte(r.err.Error()), []byte(c.want))):
				t.Errorf("server: %v; want errClientFailed with %q", r.err, c.want)
			}
		})
	}
}

// A refusal's text reaches the client's error as one line.
func TestClientShowsRefusal(t *testing.T) {
	srv, cli := tcpPair(t)
	go func() {
		writeMsg(srv, kindChallenge, make([]byte, 33))
		readMsg(srv, kindHello)
		writeMsg(srv, kindRefusal, []byte("create 1 QPs: ibv_create_qp: Cannot allocate memory\n(errno 12)"))
	}()
	_, _, err := clientHandshake(context.Background(), cli, nil, sampleEndpoint(1))
	if err == nil || errors.Is(err, transport.ErrAuth) || !bytes.Contains([]byte(err.Error()), []byte("Cannot allocate memory (errno 12)")) {
		t.Errorf("client: %v, want the server's refusal on one line", err)
	}
}
