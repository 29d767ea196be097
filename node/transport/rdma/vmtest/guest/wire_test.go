//go:build rdmaguest

package guest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
)

// These tests talk to a real node serve over its RDMA exchange as a peer
// that misbehaves. They encode the frames by hand from the format written
// at the top of node/transport/rdma/exchange.go, so they check that
// format as well as the server:
//
//	magic "RDSW" | version u8 | kind u8 | body length u32 | body
//	hello    = lid u16 | gid [16] | mtu u8 | max_dest_rd_atomic u8 | n u16 |
//	           n × (qpn u32 | psn u32) | mac [32]
//	hello-cm = n u16 | mac [32]

const (
	// wireV is the exchange's version: 2 added hello-cm and welcome-cm,
	// 3 the region as several memory regions, 4 the pipelined region, 5
	// the window's release.
	wireV      = 5
	kChallenge = 1
	kHello     = 2
	kWelcome   = 3
	kRefusal   = 4
	kAbort     = 6
	kHelloCM   = 7
	// regionBytes is the length of the region record that ends a welcome
	// (addr, length, seed, flags, mr_size, n), with one rkey.
	regionBytes = 8 + 8 + 8 + 1 + 8 + 2 + 4
)

const wireSecret = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"

func frame(magic string, version, kind byte, body []byte) []byte {
	b := append([]byte(magic), version, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...)
}

// endpointBytes is an endpoint with n QPs whose GID is the guest's RoCE v2
// address: well formed, so that only what a case changes is wrong.
func endpointBytes(n int) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = append(b, net.ParseIP(guestIP).To16()...)
	b = append(b, 3, 16) // mtu 1024, responder depth 16
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	for i := range n {
		b = binary.BigEndian.AppendUint32(b, uint32(0x100+i))
		b = binary.BigEndian.AppendUint32(b, uint32(0x4242+i))
	}
	return b
}

func mac(nonce, ep []byte) []byte {
	key, _ := hex.DecodeString(wireSecret)
	m := hmac.New(sha256.New, key)
	m.Write(nonce)
	m.Write(ep)
	return m.Sum(nil)
}

// peer connects to the server and reads its challenge.
func peer(t *testing.T, port int) (*net.TCPConn, []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("%s:%d", guestIP, port), 10*time.Second)
	if err != nil {
		t.Fatalf("connect to the server: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	kind, body := readFrame(t, c)
	if kind != kChallenge || len(body) != 33 || body[0] != 1 {
		t.Fatalf("server opened with kind %d, %d bytes (auth %v); want a 33-byte challenge asking for auth", kind, len(body), body[:min(1, len(body))])
	}
	return c.(*net.TCPConn), body[1:]
}

func readFrame(t *testing.T, r io.Reader) (byte, []byte) {
	t.Helper()
	var h [10]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatalf("read a frame header: %v", err)
	}
	if string(h[:4]) != "RDSW" || h[4] != wireV {
		t.Fatalf("frame header %x: want magic RDSW, version %d", h, wireV)
	}
	body := make([]byte, binary.BigEndian.Uint32(h[6:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatalf("read a %d-byte frame body: %v", len(body), err)
	}
	return h[5], body
}

// TestMalformedHandshake sends node serve truncated, oversized,
// wrong-magic, wrong-version and out-of-range hellos, and one with a wrong
// MAC. Each must be answered with at most a refusal, never the region;
// the server must log each, stay up, and then serve a real client.
func TestMalformedHandshake(t *testing.T) {
	srv := start(t, wireSecret, serveArgs(t, "4MiB")...)
	ready := until[results.Ready](t, srv, "ready")
	ep := endpointBytes(1)
	hello := append(append([]byte(nil), ep...), make([]byte, 32)...)
	with := func(i int, v ...byte) []byte {
		b := append([]byte(nil), hello...)
		copy(b[i:], v)
		return b
	}
	cases := []struct {
		name string
		send []byte
	}{
		{"truncated header", frame("RDSW", wireV, kHello, hello)[:6]},
		{"truncated body", frame("RDSW", wireV, kHello, hello)[:30]},
		{"oversized", frame("RDSW", wireV, kHello, make([]byte, 1<<20))},
		{"wrong magic", frame("SSH-", wireV, kHello, hello)},
		{"wrong version", frame("RDSW", 7, kHello, hello)},
		{"wrong kind", frame("RDSW", wireV, kWelcome, hello)},
		{"zero QPs", frame("RDSW", wireV, kHello, append(with(20, 0, 0)[:22], make([]byte, 32)...))},
		{"1025 QPs", frame("RDSW", wireV, kHello, append(append([]byte(nil), endpointBytes(1025)...), make([]byte, 32)...))},
		{"mtu 9", frame("RDSW", wireV, kHello, with(18, 9))},
		{"no mac", frame("RDSW", wireV, kHello, ep)},
		{"wrong mac", frame("RDSW", wireV, kHello, hello)},
	}
	for _, c := range cases {
		conn, _ := peer(t, ready.Port)
		conn.Write(c.send) // the server may stop reading early
		conn.CloseWrite()
		// A reset is a drop too: the server closes with our bytes unread.
		out, err := io.ReadAll(conn)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the server neither answered nor dropped the connection: %v", c.name, err)
		}
		if len(out) > 0 {
			kind, body := readFrame(t, strings.NewReader(string(out)))
			if kind != kRefusal || len(body)+10 != len(out) {
				t.Errorf("%s: server answered with kind %d and %d bytes; want one refusal, never the region", c.name, kind, len(out))
			}
		}
		conn.Close()
	}
	// Every refusal is logged, and the server is still waiting.
	warnings := 0
	for warnings < len(cases) {
		select {
		case ev, ok := <-srv.events:
			switch e := ev.(type) {
			case *results.Warning:
				if strings.Contains(e.Message, "refused connection") {
					warnings++
				}
			case *results.Error:
				t.Fatalf("server failed on a malformed hello: %s", e.Message)
			}
			if !ok {
				t.Fatalf("server exited after %d malformed hellos; stderr:\n%s", warnings, srv.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("server logged %d refusals for %d malformed hellos", warnings, len(cases))
		}
	}
	cl := start(t, wireSecret, "read", "--transport", "rdma", "--server", fmt.Sprintf("%s:%d", guestIP, ready.Port),
		"--block-size", "64KiB", "--total", "4194304", "--verify")
	res := until[results.Result](t, cl, "result")
	finish(t, cl)
	done := until[results.Done](t, srv, "done")
	finish(t, srv)
	if !res.Verified || res.Bytes != 4<<20 || done.BytesServed != 4<<20 {
		t.Errorf("the real client after the malformed ones: result %+v, server done %+v", res, done)
	}
}

// TestClientGoneAfterHandshake completes the handshake as a proper client
// (the right MAC, a well-formed endpoint), so the server sets up its QPs
// and sends the region, then ends without a bye: by dropping the
// connection, or with an abort saying why. The server cannot know what was
// read, so it must fail, not report a run of zero bytes.
func TestClientGoneAfterHandshake(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(*net.TCPConn)
		want string
	}{
		{"disconnect", func(*net.TCPConn) {}, "disconnected without a bye"},
		{"abort", func(c *net.TCPConn) {
			c.Write(frame("RDSW", wireV, kAbort, []byte("connect QP 1 of 1: ibv_modify_qp(RTR): invalid argument")))
		}, "failed after the handshake: connect QP 1 of 1: ibv_modify_qp(RTR): invalid argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := start(t, wireSecret, serveArgs(t, "4MiB")...)
			ready := until[results.Ready](t, srv, "ready")
			conn, nonce := peer(t, ready.Port)
			ep := endpointBytes(2)
			conn.Write(frame("RDSW", wireV, kHello, append(append([]byte(nil), ep...), mac(nonce, ep)...)))
			kind, body := readFrame(t, conn)
			if kind != kWelcome {
				t.Fatalf("server answered a proper hello with kind %d: %q", kind, body)
			}
			if n := len(body); n != 22+2*8+regionBytes || binary.BigEndian.Uint64(body[n-regionBytes+8:]) != 4<<20 {
				t.Fatalf("welcome of %d bytes does not hold 2 QPs and the 4MiB region: %x", n, body)
			}
			c.end(conn)
			conn.Close()
			msg := failure(t, srv)
			if !strings.Contains(msg, c.want) {
				t.Errorf("server: %q, want it to say %q", msg, c.want)
			}
		})
	}
}

// TestConnectModeMismatch sends a connect-tcp server a well-formed,
// authenticated hello-cm: the server must refuse it with a message that
// names both modes and the fix, and send no region.
func TestConnectModeMismatch(t *testing.T) {
	srv := start(t, wireSecret, serveArgs(t, "4MiB")...)
	ready := until[results.Ready](t, srv, "ready")
	conn, nonce := peer(t, ready.Port)
	body := binary.BigEndian.AppendUint16(nil, 1)
	conn.Write(frame("RDSW", wireV, kHelloCM, append(body, mac(nonce, body)...)))
	kind, msg := readFrame(t, conn)
	if kind != kRefusal || !strings.Contains(string(msg), "connect cm") || !strings.Contains(string(msg), "connect tcp") || !strings.Contains(string(msg), "rdma.connect") {
		t.Fatalf("connect-tcp server answered hello-cm with kind %d: %q; want a refusal naming both modes", kind, msg)
	}
}
