package rdma

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/transport"
)

type fakeSession struct {
	ep     endpoint
	closed bool
}

func (f *fakeSession) endpoint() endpoint { return f.ep }
func (f *fakeSession) close()             { f.closed = true }

func sampleEndpoint(n int) endpoint {
	e := endpoint{LID: 7, MTU: 3, MaxDestRdAtomic: 128}
	copy(e.GID[:], net.ParseIP("::ffff:10.0.2.15").To16())
	for i := range n {
		e.QPs = append(e.QPs, qpAddr{QPN: uint32(100 + i), PSN: uint32(0xabc00 + i)})
	}
	return e
}

// handshake runs both sides over a pipe and returns what each ended with.
func handshake(t *testing.T, serverSecret, clientSecret []byte, qps int) (client endpoint, reg regionRecord, cerr error, sess serverSession, serr error, prepared *endpoint) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	region := regionRecord{Addr: 0x7f0000001000, Length: 8 << 20, Seed: 0xfeed, Patterned: true, MRSize: 3 << 20, RKeys: []uint32{0x1234, 0x1235, 0x1236}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sess, serr = serverHandshake(ctx, a, serverSecret, region, func(c endpoint) (serverSession, error) {
			prepared = &c
			ep := sampleEndpoint(len(c.QPs))
			ep.LID = 9
			return &fakeSession{ep: ep}, nil
		})
		if serr != nil {
			a.Close() // as the server drops a refused connection
		}
	}()
	client, reg, cerr = clientHandshake(ctx, b, clientSecret, sampleEndpoint(qps))
	if cerr != nil {
		b.Close() // as Dial drops the connection it failed on
	}
	<-done
	return
}

func TestHandshakeCarriesEverything(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	srvEp, reg, cerr, sess, serr, prepared := handshake(t, secret, secret, 3)
	if cerr != nil || serr != nil {
		t.Fatalf("client: %v, server: %v", cerr, serr)
	}
	want := sampleEndpoint(3)
	if prepared == nil || prepared.LID != want.LID || prepared.GID != want.GID || prepared.MTU != want.MTU ||
		prepared.MaxDestRdAtomic != want.MaxDestRdAtomic || len(prepared.QPs) != 3 || prepared.QPs[2] != want.QPs[2] {
		t.Errorf("server got client endpoint %+v, want %+v", prepared, want)
	}
	if srvEp.LID != 9 || len(srvEp.QPs) != 3 || sess == nil {
		t.Errorf("client got server endpoint %+v", srvEp)
	}
	if reg.Addr != 0x7f0000001000 || reg.Length != 8<<20 || reg.Seed != 0xfeed || !reg.Patterned || reg.MRSize != 3<<20 ||
		len(reg.RKeys) != 3 || reg.rkeyAt(0) != 0x1234 || reg.rkeyAt(3<<20-1) != 0x1234 || reg.rkeyAt(3<<20) != 0x1235 || reg.rkeyAt(8<<20-1) != 0x1236 {
		t.Errorf("client got region %+v", reg)
	}
}

func TestHandshakeWithoutSecret(t *testing.T) {
	_, reg, cerr, _, serr, _ := handshake(t, nil, nil, 1)
	if cerr != nil || serr != nil || len(reg.RKeys) != 3 || reg.RKeys[0] != 0x1234 {
		t.Fatalf("no-auth handshake: client %v, server %v, region %+v", cerr, serr, reg)
	}
}

// A client without the right secret learns nothing of the region, and
// both sides say authentication failed.
func TestHandshakeRefusesWrongSecret(t *testing.T) {
	for _, cs := range [][]byte{[]byte("not the secret, but same length!"), nil} {
		_, reg, cerr, sess, serr, prepared := handshake(t, []byte("0123456789abcdef0123456789abcdef"), cs, 1)
		if !errors.Is(cerr, transport.ErrAuth) || !errors.Is(serr, transport.ErrAuth) && cs != nil {
			t.Errorf("client secret %q: client %v, server %v; want ErrAuth", cs, cerr, serr)
		}
		if serr == nil || sess != nil || prepared != nil || reg.Length != 0 || reg.RKeys != nil {
			t.Errorf("client secret %q: server prepared QPs (%v) or sent the region (%+v)", cs, prepared, reg)
		}
	}
}

func TestReadMsgRejectsMalformed(t *testing.T) {
	good := func() []byte {
		var b bytes.Buffer
		writeMsg(&b, kindHello, sampleEndpoint(1).encode())
		return b.Bytes()
	}
	for _, c := range []struct {
		name string
		mod  func([]byte) []byte
		want string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"version", func(b []byte) []byte { b[4] = 9; return b }, "version 9"},
		{"kind", func(b []byte) []byte { b[5] = kindBye; return b }, "got bye"},
		{"huge", func(b []byte) []byte { b[6] = 0x7f; return b }, "over"},
		{"short", func(b []byte) []byte { return b[:len(b)-3] }, "unexpected EOF"},
	} {
		_, body, err := readMsg(bytes.NewReader(c.mod(good())), kindHello)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: readMsg = %v, %v; want an error with %q", c.name, body, err, c.want)
		}
	}
	if _, body, err := readMsg(bytes.NewReader(good()), kindHello); err != nil || len(body) != 30 {
		t.Errorf("good frame: %d bytes, %v", len(body), err)
	}
}

func TestDecodeEndpointChecksLengths(t *testing.T) {
	b := sampleEndpoint(4).encode()
	if _, _, err := decodeEndpoint(b[:len(b)-1]); err == nil {
		t.Error("endpoint missing a byte of its last QP decoded")
	}
	bad := append([]byte(nil), b...)
	bad[20], bad[21] = 0xff, 0xff // 65535 QPs
	if _, _, err := decodeEndpoint(bad); err == nil {
		t.Error("endpoint claiming 65535 QPs decoded")
	}
	bad = append([]byte(nil), b...)
	bad[18] = 6 // no such MTU
	if _, _, err := decodeEndpoint(bad); err == nil {
		t.Error("endpoint with mtu code 6 decoded")
	}
	good := regionRecord{Length: 10, MRSize: 4, RKeys: []uint32{1, 2, 3}}.encode()
	if r, err := decodeRegion(good); err != nil || len(r.RKeys) != 3 {
		t.Errorf("three memory regions of 4 bytes over 10: %+v, %v", r, err)
	}
	if _, err := decodeRegion(append(good, 0)); err == nil {
		t.Error("region record with a trailing byte decoded")
	}
	if _, err := decodeRegion(good[:len(good)-1]); err == nil {
		t.Error("region record missing a byte of its last rkey decoded")
	}
	for _, r := range []regionRecord{
		{Length: 10, MRSize: 4, RKeys: []uint32{1, 2}},       // too few to cover it
		{Length: 10, MRSize: 4, RKeys: []uint32{1, 2, 3, 4}}, // one too many
		{Length: 10, MRSize: 0, RKeys: []uint32{1}},          // no size
		{Length: 10, MRSize: 10},                             // no rkey
	} {
		if _, err := decodeRegion(r.encode()); err == nil {
			t.Errorf("region %+v decoded", r)
		}
	}
}

func gidOf(index int, ip, typ string) GID { return GID{Index: index, GID: ip, Type: typ} }

func TestChooseGID(t *testing.T) {
	gids := []GID{
		gidOf(0, "fe80::5054:ff:fe12:3456", "RoCE v1"),
		gidOf(1, "fe80::5054:ff:fe12:3456", "RoCE v2"),
		gidOf(2, "::ffff:10.0.2.15", "RoCE v1"),
		gidOf(3, "::ffff:10.0.2.15", "RoCE v2"),
		gidOf(4, "fd00::15", "RoCE v2"),
		gidOf(5, "::ffff:192.168.7.2", "RoCE v2"),
	}
	for _, c := range []struct {
		addr string
		want int
	}{
		{"10.0.2.15", 3},   // the address in use, RoCE v2 over v1
		{"fd00::15", 4},    // IPv6 address
		{"", 3},            // none: IPv4-mapped first, v2 first
		{"0.0.0.0", 3},     // unspecified is none
		{"192.168.7.2", 5}, // another interface
	} {
		g, err := chooseGID(gids, net.ParseIP(c.addr))
		if err != nil || g.Index != c.want {
			t.Errorf("chooseGID(%q) = %d, %v; want %d", c.addr, g.Index, err, c.want)
		}
	}
	if _, err := chooseGID(gids, net.ParseIP("10.9.9.9")); err == nil || !strings.Contains(err.Error(), "no GID") {
		t.Errorf("address without a GID: %v, want an error naming the GIDs", err)
	}
	// Without IPv4-mapped GIDs a global one beats link-local.
	g, err := chooseGID([]GID{gids[1], gids[4]}, nil)
	if err != nil || g.Index != 4 {
		t.Errorf("no IPv4 GID: chose %d, %v; want the global 4", g.Index, err)
	}
}

// TestReadyRegions: a pipelined region record keeps its flag, and the
// client takes the server's ready-region messages in order, each with its
// rkey and the mapping's address; one out of order is a protocol error,
// and the server's abort in their place becomes the client's error with
// the server's reason.
func TestReadyRegions(t *testing.T) {
	rec := regionRecord{Addr: 1 << 40, Length: 6 << 20, MRSize: 2 << 20, RKeys: make([]uint32, 3), Pipelined: true}
	got, err := decodeRegion(rec.encode())
	if err != nil || !got.Pipelined || got.ODP || len(got.RKeys) != 3 {
		t.Fatalf("pipelined region record decoded to %+v, %v", got, err)
	}
	var b bytes.Buffer
	for i, k := range []uint32{0x11, 0x22, 0x33} {
		if err := writeMsg(&b, kindRegion, regionBody(i, k, 0x7f00_0000_0000+uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []uint32{0x11, 0x22, 0x33} {
		rkey, addr, err := readRegion(&b, i, 3)
		if err != nil || rkey != want || addr != 0x7f00_0000_0000+uint64(i) {
			t.Errorf("region %d: rkey %#x, addr %#x, %v; want %#x", i, rkey, addr, err, want)
		}
	}
	writeMsg(&b, kindRegion, regionBody(2, 0x33, 1))
	if _, _, err := readRegion(&b, 1, 3); !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), "want 2") {
		t.Errorf("region 3 where 2 was due: %v; want a protocol error naming the order", err)
	}
	writeMsg(&b, kindAbort, []byte("populate memory region 2 of 3: input/output error"))
	if _, _, err := readRegion(&b, 1, 3); err == nil || !strings.Contains(err.Error(), "input/output error") || !strings.Contains(err.Error(), "memory region 2 of 3") {
		t.Errorf("the server's abort: %v; want its reason", err)
	}
}

// TestReleases: a windowed region record keeps its flag; the server's
// readEnd hands each of the client's releases to its window, in the order
// sent, until the bye; a release to a server without a window is a
// protocol error, as is the window's refusal of one out of order.
func TestReleases(t *testing.T) {
	rec := regionRecord{Addr: 1 << 40, Length: 6 << 20, MRSize: 2 << 20, RKeys: make([]uint32, 3), Pipelined: true, Windowed: true}
	if got, err := decodeRegion(rec.encode()); err != nil || !got.Windowed || !got.Pipelined {
		t.Fatalf("windowed region record decoded to %+v, %v", got, err)
	}
	send := func(msgs ...[]byte) net.Conn {
		cl, srv := net.Pipe()
		go func() {
			for _, m := range msgs {
				if _, err := cl.Write(m); err != nil {
					return
				}
			}
			cl.Close()
		}()
		return srv
	}
	frame := func(kind byte, body []byte) []byte {
		var b bytes.Buffer
		writeMsg(&b, kind, body)
		return b.Bytes()
	}
	var got []int
	n, reads, err := readEnd(send(frame(kindRelease, releaseBody(0)), frame(kindRelease, releaseBody(1)), frame(kindBye, byeBody(6<<20, 6))),
		func(i int) error { got = append(got, i); return nil })
	if err != nil || n != 6<<20 || reads != 6 || !slices.Equal(got, []int{0, 1}) {
		t.Errorf("releases %v, bye %d bytes in %d reads, %v; want releases 0 1, then the bye", got, n, reads, err)
	}
	if _, _, err := readEnd(send(frame(kindRelease, releaseBody(0))), nil); !errors.Is(err, errProtocol) {
		t.Errorf("a release without a window: %v; want a protocol error", err)
	}
	refuse := errors.New("release of memory region 2, want 1")
	if _, _, err := readEnd(send(frame(kindRelease, releaseBody(1))), func(int) error { return refuse }); !errors.Is(err, refuse) || !errors.Is(err, errClientFailed) {
		t.Errorf("a refused release: %v; want the window's refusal as the client's failure", err)
	}
}
