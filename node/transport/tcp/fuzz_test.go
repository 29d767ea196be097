package tcp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"rdmasweep/node/transport"
)

// FuzzServeRequests feeds arbitrary bytes, as a client's request stream,
// to the server's request loop, and checks every reply against an
// independent reading of the same bytes: a reply carries data only for a
// well-formed read inside the region, and then exactly the region's bytes.
// The seed corpus is in testdata/fuzz/FuzzServeRequests.
func FuzzServeRequests(f *testing.F) {
	req := func(op uint16, off uint64, n uint32) []byte {
		b := make([]byte, requestSize)
		request{op: op, tag: 1, length: n, offset: off}.encode(b)
		return b
	}
	f.Add(req(opRead, 0, 16))
	f.Add(append(req(opRead, 250, 6), req(opRead, 255, 2)...))
	f.Add(req(opRead, 1<<63, 1))
	f.Add(req(2, 0, 1))
	f.Add(req(opRead, 0, MaxBlock+1)[:13])

	const size = 256
	// The region sits inside a larger buffer whose outside is marked, so a
	// leak past either end would show.
	backing := bytes.Repeat([]byte{0xEE}, 3*size)
	mem := backing[size : 2*size : 2*size]
	for i := range mem {
		mem[i] = byte(i*7 + 3)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		s := &server{mem: mem, fd: -1, warn: func(string) {}}
		c := memConn{Reader: bytes.NewReader(in), out: &out}
		s.serveConn(c, new(transport.ServeStats), s.writer(c))
		check(t, in, out.Bytes(), mem)
	})
}

// memConn is a connection whose client side is a fixed byte stream; the
// server's replies collect in out.
type memConn struct {
	net.Conn // nil: only Read and Write are used
	io.Reader
	out *bytes.Buffer
}

func (c memConn) Read(b []byte) (int, error)  { return c.Reader.Read(b) }
func (c memConn) Write(b []byte) (int, error) { return c.out.Write(b) }

// check replays the client's bytes frame by frame and checks the replies.
func check(t *testing.T, in, out, mem []byte) {
	le := binary.LittleEndian
	for len(in) >= requestSize {
		frame := in[:requestSize]
		in = in[requestSize:]
		if len(out) < replySize {
			return // the server stopped after a fatal frame; nothing more may follow
		}
		status, _, length, err := decodeReply(out[:replySize])
		if err != nil {
			t.Fatalf("reply header: %v", err)
		}
		out = out[replySize:]
		okFrame := le.Uint32(frame) == magic && le.Uint16(frame[4:]) == version && le.Uint16(frame[6:]) == opRead
		off, n := le.Uint64(frame[16:]), le.Uint32(frame[12:])
		inside := okFrame && n <= MaxBlock && off <= uint64(len(mem)) && uint64(n) <= uint64(len(mem))-off
		if (status == statusOK) != inside {
			t.Fatalf("request off %d len %d (well-formed %v): status %q", off, n, okFrame, statusText(status))
		}
		if status != statusOK {
			if length != 0 {
				t.Fatalf("error reply %q carries %d bytes", statusText(status), length)
			}
			if le.Uint32(frame) != magic || le.Uint16(frame[4:]) != version {
				if len(out) != 0 {
					t.Fatalf("%d bytes sent after the framing broke", len(out))
				}
				return
			}
			continue
		}
		if length != n || uint32(len(out)) < n {
			t.Fatalf("reply length %d for a read of %d (%d bytes left)", length, n, len(out))
		}
		if !bytes.Equal(out[:n], mem[off:off+uint64(n)]) {
			t.Fatalf("reply to read at %d differs from the region", off)
		}
		out = out[n:]
	}
	if len(out) != 0 {
		t.Fatalf("%d reply bytes with no request", len(out))
	}
}
