package transport_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/transport"
)

func listen(t *testing.T) *transport.Listener {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := transport.NewListener(ln)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l *transport.Listener, hello string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, hello)
	return c
}

// hello accepts a connection whose first 5 bytes are "hello".
func hello(c *net.TCPConn, _ time.Time) error {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 5)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if string(b) != "hello" {
		return errors.New("bad hello " + string(b))
	}
	return c.SetDeadline(time.Time{})
}

func TestAcceptSkipsRefusedConnections(t *testing.T) {
	l := listen(t)
	dial(t, l, "HELLO")
	dial(t, l, "hello")
	var refused []string
	c, release, err := l.Accept(context.Background(), 10*time.Second, hello, func(_ net.Addr, err error) {
		refused = append(refused, err.Error())
	})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if c == nil || len(refused) != 1 || refused[0] != "bad hello HELLO" {
		t.Fatalf("accepted %v after refusing %q; want one refused", c, refused)
	}
}

func TestAcceptTimeoutAndCancel(t *testing.T) {
	l := listen(t)
	begun := time.Now()
	_, _, err := l.Accept(context.Background(), 200*time.Millisecond, hello, nil)
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "no client within the accept timeout of 200ms") {
		t.Fatalf("Accept with no client = %v", err)
	}
	if el := time.Since(begun); el < 200*time.Millisecond {
		t.Fatalf("gave up after %v", el)
	}

	// Cancelling interrupts a handshake stuck in a read, and a later one
	// on the accepted connection.
	ctx, cancel := context.WithCancel(context.Background())
	dial(t, l, "hel") // stops mid-hello
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, _, err := l.Accept(ctx, 0, hello, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept cancelled mid-handshake = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	dial(t, l, "hello")
	c, release, err := l.Accept(ctx, 0, hello, nil)
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
	l := listen(t)
	dial(t, l, "hello")
	c, release, err := l.Accept(context.Background(), 0, hello, nil)
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
	if _, _, err := l.Accept(context.Background(), 0, hello, nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
}
