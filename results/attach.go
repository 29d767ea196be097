package results

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The attach protocol, version AttachVersion: how a launcher that starts
// node before its command line is known (Slurm, whose steps take long to
// start and whose stdin is slow to deliver; SSH for a pool sweep's
// agents) hands node that command line, its control lines, and takes
// back its output, over a TCP connection node opens to the runner.
//
//   - The runner listens, and starts `node attach --runner HOST:PORT`
//     with a fresh random token (32 bytes, hex). Under Slurm the token
//     travels in srun's environment as a MUNGE credential
//     (AttachCredEnv): its payload encrypted under the cluster's MUNGE
//     key and decodable only by a process of the runner's own UID, which
//     node attach gets from `unmunge` on the node. Over SSH it is the
//     first line of the session's stdin (--token-stdin), inside SSH's
//     encryption. AttachTokenEnv, the token in the clear, is for a
//     launcher whose environment never leaves the host (tests). The
//     token is the first AttachKey of both sides, and never crosses the
//     network in the clear.
//   - node dials HOST:PORT and sends one AttachHello line, in the clear:
//     the protocol's version, the key's ID (a MAC of a constant under the
//     key: it names the key and reveals nothing of it) and a fresh random
//     nonce (NonceSize bytes, hex). The runner drops a connection whose ID
//     it did not give out, or that is not its agent's one waiting
//     connection, and fails the agent's command when the version is not
//     its own.
//   - From then on, both ways, the connection carries only sealed frames
//     (AttachChannel): AES-256-GCM under a key per direction, drawn by
//     HKDF-SHA256 from the connection's key and the hello's nonce, with
//     the frame's sequence number in its direction as the GCM nonce. A
//     frame altered, forged without the key, replayed, dropped or
//     reordered fails to open, and its receiver ends the connection. What
//     an eavesdropper sees is the hello and each frame's length.
//   - The runner's first frame is the command (FrameCommand): node's
//     subcommand and flags as JSON, without the binary's path. node runs
//     nothing before it has opened that frame: whoever answers the
//     connection without the key gets nothing run, and node says so on
//     its stderr.
//   - Both sides then replace the key with AttachKey.Next(nonce), an HMAC
//     of the old key and this connection's nonce: nothing new travels, and
//     the next connection has another ID, another nonce and other frame
//     keys, so nothing replayed from an earlier connection opens.
//   - Then the runner sends the command's stdin (FrameStdin: its Control
//     lines, the data path's secret among them) and its end
//     (FrameStdinEnd, which means stop, as the end of stdin does under
//     --control-stdin; the connection's end means the same). node sends
//     the command's stdout (FrameStdout: its events) and stderr
//     (FrameStderr), then how it ended (FrameEnd, an AttachEnd), and
//     closes the connection.
//
// node attach's own stdout and stderr (srun's output stream, or the SSH
// session's) carry only its own messages: why it could not attach.
//
// An attached node runs node's own subcommands only (AttachCommands), and
// its `node run` only the peers' programs (PeerPrograms) and node itself:
// the runner never asks for more, so a command line that does is not the
// runner's.
//
// `node attach --loop` serves one command after another, so that a
// launcher whose starts are slow (a Slurm step costs 70 ms of an idle
// 2-core machine, and steps started together queue for its CPUs) starts
// node once per host and role rather than once per point: once a command
// has started it dials again with the next key and a new nonce, for the
// next command, which the runner sends only after it has seen the end of
// this one. A connection the runner closes before sending a command ends
// node attach (with status 0 after the first command), once the running
// command has ended.

// AttachVersion is the attach protocol's version, in every hello. 2: the
// token under MUNGE, and everything after the hello sealed, output
// included (1 sent the command with a MAC, and the rest in the clear).
const AttachVersion = 2

// AttachTokenEnv names the environment variable that carries node
// attach's token in the clear, for a launcher whose environment stays on
// the host.
const AttachTokenEnv = "RDMASWEEP_ATTACH_TOKEN"

// AttachCredEnv names the environment variable that carries node attach's
// token as a MUNGE credential restricted to the runner's UID (Slurm).
const AttachCredEnv = "RDMASWEEP_ATTACH_CRED"

// MaxAttachLine bounds the hello.
const MaxAttachLine = 64 << 10

// PeerPrograms are the programs an attached `node run` starts, besides
// node itself: the peers' tools (runner/points/peer), by name, looked up
// on PATH.
var PeerPrograms = []string{"ib_read_bw", "iperf3", "fio"}

// AttachHello is node attach's line to the runner on each connection,
// the only one in the clear.
type AttachHello struct {
	V     int    `json:"v"`     // AttachVersion
	ID    string `json:"id"`    // AttachKey.ID of node's key for this connection
	Nonce string `json:"nonce"` // hex: NonceSize random bytes
	Pid   int    `json:"pid"`
}

// AttachKey is what proves a runner to its agent, and seals their
// connection: the token at first, then each connection's Next. Both
// sides hold it; it never crosses the network.
type AttachKey []byte

// Labels that keep the key's uses apart: an ID is never a next key, nor
// a direction's frame key the other's.
const (
	attachIDLabel       = "rdmasweep attach id"
	attachNextLabel     = "attach-next"
	attachToNodeLabel   = "rdmasweep attach v2 runner to node"
	attachToRunnerLabel = "rdmasweep attach v2 node to runner"
)

// ID names the key in a hello without revealing it.
func (k AttachKey) ID() string {
	return hex.EncodeToString(Answer(k, nil, []byte(attachIDLabel))[:16])
}

// Next is the key of the next connection, once a command has been sent
// (runner) or opened (node) on the connection whose hello had nonce.
func (k AttachKey) Next(nonce []byte) AttachKey {
	return Answer(k, nonce, []byte(attachNextLabel))
}

// NewAttachHello is node's hello for a connection under k, with a fresh
// nonce, which it returns to seal the connection with.
func NewAttachHello(k AttachKey, pid int) (AttachHello, []byte, error) {
	nonce := make([]byte, NonceSize)
	if err := NewNonce(nonce); err != nil {
		return AttachHello{}, nil, err
	}
	return AttachHello{V: AttachVersion, ID: k.ID(), Nonce: hex.EncodeToString(nonce), Pid: pid}, nonce, nil
}

// HelloNonce is the hello's nonce, or an error if it is not NonceSize
// bytes of hex.
func (h AttachHello) HelloNonce() ([]byte, error) {
	n, err := hex.DecodeString(h.Nonce)
	if err != nil || len(n) != NonceSize {
		return nil, fmt.Errorf("attach hello: nonce %q: want %d bytes of hex", h.Nonce, NonceSize)
	}
	return n, nil
}

// AttachEnd is how an attached command ended: its exit status, or the
// signal that killed it (Signal, a name such as "TERM", and Status -1).
type AttachEnd struct {
	Status int    `json:"status"`
	Signal string `json:"signal,omitempty"`
}

// Frame kinds: the first byte of a frame's sealed content.
const (
	FrameCommand  byte = 'c' // runner: the command line, JSON; the first frame
	FrameStdin    byte = 'i' // runner: bytes of the command's stdin
	FrameStdinEnd byte = 'z' // runner: the end of its stdin
	FrameStdout   byte = 'o' // node: bytes of the command's stdout
	FrameStderr   byte = 'e' // node: bytes of its stderr
	FrameEnd      byte = 'x' // node: an AttachEnd, JSON; the last frame
)

// MaxAttachFrame bounds a frame's content; Send splits what is longer.
const MaxAttachFrame = 64 << 10

// ErrAttachFrame is a frame that does not open under its direction's key
// and sequence number: sent without the key, altered, replayed, dropped
// or reordered on the way.
var ErrAttachFrame = errors.New("a frame failed authentication (not sealed with the key, or altered, replayed or reordered on the way)")

// AttachChannel is one connection's sealed frames, after the hello. A
// frame is its sealed length (4 bytes, big-endian, also the AEAD's
// additional data) and the sealed kind and content; the GCM nonce is the
// frame's sequence number in its direction. Send is safe for concurrent
// use; Recv is for one reader.
type AttachChannel struct {
	r          io.Reader
	w          io.Writer
	send, recv cipher.AEAD

	mu      sync.Mutex // Send
	sendSeq uint64
	recvSeq uint64
}

// RunnerChannel is the runner's side of the connection whose hello had
// nonce, under k; r reads what follows the hello.
func (k AttachKey) RunnerChannel(r io.Reader, w io.Writer, nonce []byte) *AttachChannel {
	return &AttachChannel{r: r, w: w, send: k.frameKey(nonce, attachToNodeLabel), recv: k.frameKey(nonce, attachToRunnerLabel)}
}

// NodeChannel is node's side of the connection whose hello had nonce.
func (k AttachKey) NodeChannel(r io.Reader, w io.Writer, nonce []byte) *AttachChannel {
	return &AttachChannel{r: r, w: w, send: k.frameKey(nonce, attachToRunnerLabel), recv: k.frameKey(nonce, attachToNodeLabel)}
}

func (k AttachKey) frameKey(nonce []byte, label string) cipher.AEAD {
	key, err := hkdf.Key(sha256.New, k, nonce, label, 32)
	if err != nil {
		panic(err) // 32 bytes of SHA-256's HKDF never fail
	}
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	return aead
}

func seqNonce(seq uint64) []byte {
	n := make([]byte, 12)
	binary.BigEndian.PutUint64(n[4:], seq)
	return n
}

// Send seals kind and b as one frame, or several of at most
// MaxAttachFrame bytes each; an empty b is one frame.
func (c *AttachChannel) Send(kind byte, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for first := true; first || len(b) > 0; first = false {
		n := min(len(b), MaxAttachFrame)
		plain := append([]byte{kind}, b[:n]...)
		b = b[n:]
		frame := make([]byte, 4, 4+len(plain)+c.send.Overhead())
		binary.BigEndian.PutUint32(frame, uint32(len(plain)+c.send.Overhead()))
		frame = c.send.Seal(frame, seqNonce(c.sendSeq), plain, frame[:4])
		c.sendSeq++
		if _, err := c.w.Write(frame); err != nil {
			return err
		}
	}
	return nil
}

// Recv opens the next frame. A frame that does not open is
// ErrAttachFrame, and so is every later one: the channel is then dead.
func (c *AttachChannel) Recv() (kind byte, b []byte, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n <= uint32(c.recv.Overhead()) || n > uint32(1+MaxAttachFrame+c.recv.Overhead()) {
		c.recvSeq = ^uint64(0)
		return 0, nil, fmt.Errorf("%w: length %d", ErrAttachFrame, n)
	}
	sealed := make([]byte, n)
	if _, err := io.ReadFull(c.r, sealed); err != nil {
		return 0, nil, err
	}
	plain, err := c.recv.Open(sealed[:0], seqNonce(c.recvSeq), sealed, hdr[:])
	if err != nil || c.recvSeq == ^uint64(0) {
		c.recvSeq = ^uint64(0)
		return 0, nil, ErrAttachFrame
	}
	c.recvSeq++
	return plain[0], plain[1:], nil
}

// Writer is w's bytes sent as frames of kind.
func (c *AttachChannel) Writer(kind byte) io.Writer { return frameWriter{c, kind} }

type frameWriter struct {
	c    *AttachChannel
	kind byte
}

func (f frameWriter) Write(b []byte) (int, error) {
	if err := f.c.Send(f.kind, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// SendCommand sends argv, the runner's first frame.
func (c *AttachChannel) SendCommand(argv []string) error {
	b, _ := json.Marshal(argv)
	return c.Send(FrameCommand, b)
}

// RecvCommand opens the runner's first frame, the command line.
func (c *AttachChannel) RecvCommand() ([]string, error) {
	kind, b, err := c.Recv()
	if err != nil {
		return nil, err
	}
	var argv []string
	if kind != FrameCommand || json.Unmarshal(b, &argv) != nil {
		return nil, fmt.Errorf("%w: the first frame is not a command line", ErrAttachFrame)
	}
	return argv, nil
}

// ReadHello reads a hello line from br, at most MaxAttachLine bytes.
func ReadHello(br *bufio.Reader) (AttachHello, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		line = append(line, chunk...)
		if err != nil {
			return AttachHello{}, err
		}
		if len(line) > MaxAttachLine {
			return AttachHello{}, fmt.Errorf("attach hello over %d bytes", MaxAttachLine)
		}
		if !isPrefix {
			break
		}
	}
	var h AttachHello
	if err := json.Unmarshal(line, &h); err != nil {
		return AttachHello{}, fmt.Errorf("attach hello: %w", err)
	}
	return h, nil
}
