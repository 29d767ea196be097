package tcp

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/testbed/testenv"
)

// TestSplitRepliesSendsEachRunItsWay: in a batch that mixes replies under
// and over the sendfile threshold, each run goes to its own sender, in
// the batch's order, and every reply is sent once.
func TestSplitRepliesSendsEachRunItsWay(t *testing.T) {
	var got []string
	rec := func(way string) func([]reply) error {
		return func(rs []reply) error {
			for _, q := range rs {
				got = append(got, way+":"+string(rune('a'+q.off)))
			}
			return nil
		}
	}
	sizes := []int{100, 1000, 3000, 999, 60, 5000}
	rs := make([]reply, len(sizes))
	for i, n := range sizes {
		rs[i] = reply{off: int64(i), n: n}
	}
	if err := splitReplies(1000, rec("file"), rec("write"))(rs); err != nil {
		t.Fatal(err)
	}
	want := []string{"write:a", "file:b", "file:c", "write:d", "write:e", "file:f"}
	if len(got) != len(want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sent %v, want %v", got, want)
		}
	}
}

// TestMixedBatchOnOneSocket: a batch sent partly with sendfile and partly
// with writev on one real TCP connection reaches the client as the
// region's bytes, each after its own header, in order.
func TestMixedBatchOnOneSocket(t *testing.T) {
	const size = 4 << 20
	mem := make([]byte, size)
	for i := range mem {
		mem[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "region.dat")
	if err := os.WriteFile(path, mem, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := dupFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{mem: mem, fd: fd}
	defer unix.Close(fd)

	cli, srv, rc := loopbackPair(t, nil)

	// Under the threshold, over it twice, under it twice, over it.
	reads := []struct{ off, n int }{{5, 70 << 10}, {1 << 20, 1 << 20}, {3, 1<<20 + 1}, {9, 1}, {200, 4096}, {3 << 20, 1 << 20}}
	hdrs := make([][replySize]byte, len(reads))
	rs := make([]reply, len(reads))
	var want bytes.Buffer
	for i, r := range reads {
		encodeReply(hdrs[i][:], statusOK, uint32(i), uint32(r.n))
		rs[i] = reply{hdr: hdrs[i][:], off: int64(r.off), n: r.n}
		want.Write(hdrs[i][:])
		want.Write(mem[r.off : r.off+r.n])
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, want.Len())
		n, _ := io.ReadFull(cli, b)
		got <- b[:n]
	}()
	if err := splitReplies(1<<20, s.sendfile(rc), s.writev(srv))(rs); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the client read %d bytes, %d as sent; want %d, the headers and the region's bytes", len(b), commonPrefix(b, want.Bytes()), want.Len())
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// TestSendfileSocketGetsTheLargestSendBuffer: a connection the server
// answers with sendfile gets the host's largest send buffer, twice
// net.core.wmem_max, where that is above what autotuning reaches; one
// answered with writes keeps autotuning's.
func TestSendfileSocketGetsTheLargestSendBuffer(t *testing.T) {
	most, err := sysctlInt("/proc/sys/net/core/wmem_max", 0)
	if err != nil {
		t.Fatal(err)
	}
	auto, err := sysctlInt("/proc/sys/net/ipv4/tcp_wmem", 2)
	if err != nil {
		t.Fatal(err)
	}
	if 2*most <= auto {
		testenv.Skip(t, fmt.Sprintf("this host's wmem_max (%d) is at most half of tcp_wmem's maximum (%d): nothing to raise; Linux's defaults are 212992 and 4194304", most, auto))
	}
	f, err := os.CreateTemp(t.TempDir(), "region")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := dupFile(f)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for _, c := range []struct {
		mode SendMode
		want func(int) bool
		says string
	}{
		{SendFile, func(n int) bool { return n == 2*most }, "twice wmem_max"},
		{SendWrite, func(n int) bool { return n < 2*most }, "autotuning's, under twice wmem_max"},
	} {
		s := &server{t: &Transport{Send: c.mode}, fd: fd}
		_, _, rc := loopbackPair(t, func(srv net.Conn) { s.writer(srv) })
		var got int
		var gerr error
		rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		if !c.want(got) {
			t.Errorf("mode %d: SO_SNDBUF %d; want %s (%d)", c.mode, got, c.says, 2*most)
		}
	}
}

// loopbackPair connects a client and a server socket over loopback, hands
// the server's to prepare (when set) as a session would be, and returns
// both with the server's raw conn; the test's cleanup closes them.
func loopbackPair(t *testing.T, prepare func(net.Conn)) (cli, srv net.Conn, rc syscall.RawConn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if cli, err = net.Dial("tcp4", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if srv, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if prepare != nil {
		prepare(srv)
	}
	if rc, err = srv.(*net.TCPConn).SyscallConn(); err != nil {
		t.Fatal(err)
	}
	return cli, srv, rc
}
