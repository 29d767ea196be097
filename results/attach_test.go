package results

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// A connection's frames open only under its key and its hello's nonce,
// in their direction, in their order, unaltered: another key (an
// impostor's), another nonce (a later connection's), the next key, the
// other direction's key, a replayed, dropped, reordered or altered frame
// are all refused; and what is on the wire holds neither the key, the
// command nor the data.
func TestAttachChannel(t *testing.T) {
	k := AttachKey("t0ken")
	hello, nonce, err := NewAttachHello(k, 7)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hello.HelloNonce(); err != nil || string(n) != string(nonce) || hello.ID != k.ID() || hello.V != AttachVersion || strings.Contains(hello.ID, "t0ken") {
		t.Fatalf("hello %+v: want the version, the key's ID and the nonce (%v)", hello, err)
	}
	argv := []string{"read", "--server", "198.18.0.1:4000"}
	var wire bytes.Buffer
	runner := k.RunnerChannel(nil, &wire, nonce)
	runner.SendCommand(argv)
	runner.Send(FrameStdin, []byte(`{"secret":"5e5e5e5e"}`+"\n"))
	runner.Send(FrameStdinEnd, nil)
	frames := splitFrames(t, wire.Bytes())
	for _, s := range []string{"t0ken", "198.18.0.1", "read", "5e5e"} {
		if bytes.Contains(wire.Bytes(), []byte(s)) {
			t.Errorf("the wire holds %q", s)
		}
	}
	node := k.NodeChannel(bytes.NewReader(wire.Bytes()), io.Discard, nonce)
	if got, err := node.RecvCommand(); err != nil || strings.Join(got, " ") != strings.Join(argv, " ") {
		t.Fatalf("the runner's own command: %q, %v", got, err)
	}
	if kind, b, err := node.Recv(); err != nil || kind != FrameStdin || !bytes.Contains(b, []byte("5e5e")) {
		t.Fatalf("the runner's stdin: %c %q %v", kind, b, err)
	}
	_, other, _ := NewAttachHello(k, 7)
	join := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	altered := bytes.Clone(frames[0])
	altered[len(altered)-1] ^= 1
	for name, c := range map[string]struct {
		ch   *AttachChannel
		wire []byte
	}{
		"other key":       {AttachKey("guess").NodeChannel(nil, nil, nonce), frames[0]},
		"other nonce":     {k.NodeChannel(nil, nil, other), frames[0]},
		"next key":        {k.Next(nonce).NodeChannel(nil, nil, nonce), frames[0]},
		"its own frames":  {k.RunnerChannel(nil, nil, nonce), frames[0]},
		"altered":         {k.NodeChannel(nil, nil, nonce), altered},
		"stdin first":     {k.NodeChannel(nil, nil, nonce), frames[1]},
		"replayed":        {k.NodeChannel(nil, nil, nonce), join(frames[0], frames[0])},
		"dropped one":     {k.NodeChannel(nil, nil, nonce), join(frames[0], frames[2])},
		"version 1 line":  {k.NodeChannel(nil, nil, nonce), []byte(`{"argv":["run","--","/bin/sh"],"mac":"00"}` + "\n")},
		"truncated frame": {k.NodeChannel(nil, nil, nonce), frames[0][:len(frames[0])-1]},
	} {
		c.ch.r = bytes.NewReader(c.wire)
		var err error
		for err == nil {
			_, _, err = c.ch.Recv()
			if name != "replayed" && name != "dropped one" {
				break
			}
		}
		if err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	if k.Next(nonce).ID() == k.ID() || k.Next(nonce).ID() == k.Next(other).ID() {
		t.Error("the next key's ID is the same as this one's, or the same whatever the nonce")
	}
}

// Send splits what is longer than a frame, and the receiver gets it back
// whole, in order.
func TestAttachChannelLongWrite(t *testing.T) {
	k := AttachKey("t0ken")
	_, nonce, _ := NewAttachHello(k, 1)
	var wire bytes.Buffer
	big := bytes.Repeat([]byte("0123456789"), MaxAttachFrame/4)
	k.NodeChannel(nil, &wire, nonce).Writer(FrameStdout).Write(big)
	r := k.RunnerChannel(bufio.NewReader(&wire), nil, nonce)
	var got []byte
	for len(got) < len(big) {
		kind, b, err := r.Recv()
		if err != nil || kind != FrameStdout {
			t.Fatalf("after %d bytes: %c, %v", len(got), kind, err)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, big) {
		t.Error("a long write came back otherwise")
	}
}

func splitFrames(t *testing.T, b []byte) [][]byte {
	var fs [][]byte
	for len(b) > 0 {
		n := 4 + int(binary.BigEndian.Uint32(b))
		fs = append(fs, b[:n])
		b = b[n:]
	}
	return fs
}
