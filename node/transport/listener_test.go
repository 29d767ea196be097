package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/transport"
)

// listen listens on 127.0.0.1 with the hello handshake; refused, when
// not nil, is told of each refusal.
func listen(t *testing.T, refused func(net.Addr, error)) *transport.Listener[string] {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := transport.NewListener(ln, transport.Admission[string]{Handshake: hello, Timeout: time.Minute, Refused: refused})
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l *transport.Listener[string], hello string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, hello)
	return c
}

// hello accepts a connection whose first 5 bytes are "hello", and keeps
// its peer's address as the session.
func hello(_ context.Context, c *net.TCPConn) (string, error) {
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil {
		return "", err
	}
	if string(b) != "hello" {
		return "", errors.New("bad hello " + string(b))
	}
	return c.RemoteAddr().String(), nil
}

func TestAcceptSkipsRefusedConnections(t *testing.T) {
	refused := make(chan string, 1)
	l := listen(t, func(_ net.Addr, err error) { refused <- err.Error() })
	dial(t, l, "HELLO")
	d := dial(t, l, "hello")
	c, from, release, err := l.Accept(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if c == nil || from != d.LocalAddr().String() {
		t.Fatalf("accepted %v with session %q, want the good client's %s", c, from, d.LocalAddr())
	}
	if r := <-refused; r != "bad hello HELLO" {
		t.Fatalf("refused %q, want the bad hello", r)
	}
}

func TestAcceptTimeoutAndCancel(t *testing.T) {
	l := listen(t, nil)
	begun := time.Now()
	_, _, _, err := l.Accept(context.Background(), 200*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "no client within the accept timeout of 200ms") {
		t.Fatalf("Accept with no client = %v", err)
	}
	if el := time.Since(begun); el < 200*time.Millisecond {
		t.Fatalf("gave up after %v", el)
	}

	// Cancelling ends an Accept whose only connection is stuck in its
	// handshake, and interrupts a read on an accepted connection.
	ctx, cancel := context.WithCancel(context.Background())
	dial(t, l, "hel") // stops mid-hello
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, _, _, err := l.Accept(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept cancelled mid-handshake = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	dial(t, l, "hello")
	c, _, release, err := l.Accept(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after cancel = %v, want a deadline error", err)
	}
}

// Close interrupts the served connection and waits for release, so a
// server may free its region right after Close returns.
func TestCloseWaitsForRelease(t *testing.T) {
	l := listen(t, nil)
	dial(t, l, "hello")
	c, _, release, err := l.Accept(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	releasedAt := make(chan time.Time, 1)
	go func() {
		_, err := c.Read(make([]byte, 1)) // the client says nothing more
		served <- err
		time.Sleep(200 * time.Millisecond) // still using the region
		releasedAt <- time.Now()
		release()
	}()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	closedAt := time.Now()
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the served connection after Close = %v", err)
	}
	if r := <-releasedAt; closedAt.Before(r) {
		t.Fatalf("Close returned %v before the connection was released", r.Sub(closedAt))
	}
	if _, _, _, err := l.Accept(context.Background(), 0); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
}

// dialFrom connects to l from the local address ip and sends hello.
func dialFrom(t *testing.T, l *transport.Listener[string], ip net.IP, hello string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	c, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, hello)
	return c
}

// TestIdleConnectionsHoldNoSlot: connections that say nothing, each
// allowed a minute for its handshake, do not keep out the client behind
// them: every handshake runs on its own.
func TestIdleConnectionsHoldNoSlot(t *testing.T) {
	l := listen(t, nil)
	for range 4 {
		dial(t, l, "")
	}
	d := dial(t, l, "hello")
	c, from, release, err := l.Accept(context.Background(), 20*time.Second)
	if err != nil {
		t.Fatalf("Accept behind 4 idle connections: %v", err)
	}
	release()
	if c == nil || from != d.LocalAddr().String() {
		t.Fatalf("accepted %q, want the client behind the idle ones, %s", from, d.LocalAddr())
	}
}

// TestPeerHandshakeCap: one address may hold only PeerHandshakes
// handshakes beyond the Accepts waiting; a connection past that is
// refused at once, and another address still gets in.
func TestPeerHandshakeCap(t *testing.T) {
	busy := make(chan net.Addr, 16)
	l := listen(t, func(from net.Addr, err error) {
		if errors.Is(err, transport.ErrBusy) {
			busy <- from
		}
	})
	type accepted struct {
		from string
		err  error
	}
	got := make(chan accepted, 1)
	go func() { // one Accept waiting: the cap is PeerHandshakes+1
		_, from, release, err := l.Accept(context.Background(), 60*time.Second)
		if err == nil {
			release()
		}
		got <- accepted{from, err}
	}()
	a, b := net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)
	const extra = 3
	for range transport.PeerHandshakes + 1 + extra {
		dialFrom(t, l, a, "")
	}
	waitBusy := func(what string) net.Addr {
		select {
		case from := <-busy:
			return from
		case <-time.After(20 * time.Second):
			t.Fatalf("no refusal for %s within 20s", what)
			return nil
		}
	}
	for i := range extra {
		if from := waitBusy(fmt.Sprintf("idle connection %d past the cap", i+1)); !from.(*net.TCPAddr).IP.Equal(a) {
			t.Fatalf("refused %s, want only %s's connections past its cap", from, a)
		}
	}
	dialFrom(t, l, a, "hello") // a's cap is full even for a good client
	waitBusy("a good client from a full address")
	good := dialFrom(t, l, b, "hello")
	r := <-got
	if r.err != nil || r.from != good.LocalAddr().String() {
		t.Fatalf("Accept = %q, %v; want %s, whose address has no handshake in flight", r.from, r.err, good.LocalAddr())
	}
	select {
	case from := <-busy:
		t.Fatalf("also refused %s", from)
	default:
	}
}

// TestAdmittedWaitsForTheNextAccept: a client whose handshake passes
// while no Accept waits (the server's next Serve not begun yet, as on a
// loaded host) is kept for the next Accept, not closed on.
func TestAdmittedWaitsForTheNextAccept(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	// The client says when its handshake ends: "hello", then "!".
	gated := func(_ context.Context, c *net.TCPConn) (string, error) {
		b := make([]byte, 6)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "hello!" {
			return "", fmt.Errorf("bad hello %q: %v", b, err)
		}
		return c.RemoteAddr().String(), nil
	}
	l := transport.NewListener(ln, transport.Admission[string]{Handshake: gated, Timeout: time.Minute})
	t.Cleanup(func() { l.Close() })
	type accepted struct {
		from    string
		release func()
		err     error
	}
	first := make(chan accepted, 1)
	go func() {
		_, from, release, err := l.Accept(context.Background(), 30*time.Second)
		first <- accepted{from, release, err}
	}()
	a, b := dial(t, l, "hello"), dial(t, l, "hello")
	io.WriteString(a, "!")
	got := <-first
	if got.err != nil || got.from != a.LocalAddr().String() {
		t.Fatalf("first Accept: %q, %v; want %s", got.from, got.err, a.LocalAddr())
	}
	got.release()
	io.WriteString(b, "!") // admitted with no Accept waiting
	b.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := b.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the client admitted with no Accept waiting: read %d, %v; want it kept open (a timeout)", n, err)
	}
	_, from, release, err := l.Accept(context.Background(), 5*time.Second)
	if err != nil || from != b.LocalAddr().String() {
		t.Fatalf("second Accept: %q, %v; want the client admitted before it, %s", from, err, b.LocalAddr())
	}
	release()
}

// TestRefusalReportedAfterClose: a client refused for its secret learns
// of it from the handshake's last message and may be gone, and the
// server closed, before the handshake's goroutine has reported it; the
// refusal is reported all the same. A handshake that Close cut off is
// not: that is no one's refusal.
func TestRefusalReportedAfterClose(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	refusing, cut := make(chan struct{}), make(chan struct{})
	var reported []error
	refusedCh := make(chan error, 4)
	l := transport.NewListener(ln, transport.Admission[string]{Timeout: time.Minute,
		Handshake: func(ctx context.Context, c *net.TCPConn) (string, error) {
			b := make([]byte, 5)
			io.ReadFull(c, b)
			if string(b) == "wrong" {
				refusing <- struct{}{}
				<-ctx.Done() // the server closes before this goroutine reports
				return "", fmt.Errorf("%w: wrong or missing secret", transport.ErrAuth)
			}
			cut <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		},
		Refused: func(_ net.Addr, err error) { refusedCh <- err },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Accept(ctx, 0)
	dial(t, l, "wrong")
	<-refusing
	dial(t, l, "quiet")
	<-cut
	l.Close()
	close(refusedCh)
	for err := range refusedCh {
		reported = append(reported, err)
	}
	if len(reported) != 1 || !errors.Is(reported[0], transport.ErrAuth) {
		t.Errorf("refusals reported after Close: %v; want the wrong secret's alone", reported)
	}
}
