package results

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The attach handshake: how a launcher that starts node before its command
// line is known (Slurm, whose steps take long to start and whose stdin is
// slow to deliver) hands node that command line, and then its control
// lines, over a TCP connection node opens to the runner.
//
//   - The runner listens, and starts `node attach --runner HOST:PORT` with
//     a fresh random token in node's environment (AttachTokenEnv), or on
//     its stdin over SSH (--token-stdin): an environment is readable only
//     by its own user, a command line by anyone on the host. The token is
//     the first AttachKey of both sides, and never crosses the network.
//   - node dials HOST:PORT and sends one AttachHello line: the key's ID
//     (a MAC of a constant under the key: it names the key and reveals
//     nothing of it) and a fresh random nonce (NonceSize bytes, hex), the
//     challenge of results/challenge.go. The runner drops a connection
//     whose ID it did not give out, or that is not its agent's one
//     waiting connection.
//   - The runner sends one AttachCommand line, when it knows the command:
//     node's subcommand and flags, without the binary's path, and the
//     answer MAC = HMAC-SHA256(key, nonce || "attach-command" || argv as
//     JSON). node runs nothing until the MAC checks out (in constant
//     time): whoever answers the connection without the key, or swaps the
//     argv in flight, gets nothing run, and node says so on its stderr.
//   - Both sides then replace the key with AttachKey.Next(nonce), an HMAC
//     of the old key and this connection's nonce: nothing new travels, and
//     the next connection has another ID and another nonce, so a hello or
//     an answer replayed from an earlier connection is refused.
//   - The connection is then the subcommand's control channel, exactly as
//     stdin is under --control-stdin: Control lines, and its end means
//     stop. These lines, the data path's secret among them, are not
//     encrypted: the handshake decides who gives node its command, not who
//     may read what follows (docs/security.md).
//
// Nothing else flows, and node writes nothing after its hello: its events
// still go to its stdout.
//
// `node attach --loop` serves one command after another, so that a
// launcher whose starts are slow (a Slurm step costs 70 ms of an idle
// 2-core machine, and steps started together queue for its CPUs) starts
// node once per host and role rather than once per point:
//
//   - Each command runs with the connection as its stdin and node
//     attach's stdout and stderr as its own: node read in node attach's
//     own process, any other command as a child process.
//   - When the command has ended, node attach writes AttachEndMarker and
//     how it ended (AttachEnd) as one line on stdout and the same on
//     stderr: those streams are shared by every command, and the line
//     tells the launcher where one command's output ends.
//   - Once a command has started it dials again with the next key and a
//     new nonce, for the next command, which the runner sends only after it
//     has seen the end of this one. A connection the runner closes before
//     sending a command ends node attach (with status 0 after the first
//     command), once the running command has ended.

// AttachTokenEnv names the environment variable that carries node
// attach's token.
const AttachTokenEnv = "RDMASWEEP_ATTACH_TOKEN"

// MaxAttachLine bounds the hello and the command line of the handshake.
const MaxAttachLine = 64 << 10

// AttachHello is node attach's first and only line to the runner.
type AttachHello struct {
	ID    string `json:"id"`    // AttachKey.ID of node's key for this connection
	Nonce string `json:"nonce"` // hex: NonceSize random bytes, the runner's challenge
	Pid   int    `json:"pid"`
}

// AttachCommand is the runner's first line to an attached node.
type AttachCommand struct {
	Argv []string `json:"argv"`
	MAC  string   `json:"mac"` // hex: AttachKey.MAC of the hello's nonce and Argv
}

// AttachKey is what proves a runner to its agent on one connection: the
// token at first, then each connection's Next. Both sides hold it; it
// never crosses the network.
type AttachKey []byte

// Labels that keep the key's uses apart: an ID is never a MAC, nor a MAC
// a next key.
const (
	attachIDLabel      = "rdmasweep attach id"
	attachCommandLabel = "attach-command"
	attachNextLabel    = "attach-next"
)

// ID names the key in a hello without revealing it.
func (k AttachKey) ID() string {
	return hex.EncodeToString(Answer(k, nil, []byte(attachIDLabel))[:16])
}

// MAC is the runner's answer to the hello's nonce, bound to the command
// line it authorizes.
func (k AttachKey) MAC(nonce []byte, argv []string) string {
	return hex.EncodeToString(Answer(k, nonce, attachCommandRecord(argv)))
}

// Admit reports whether c carries the runner's answer to nonce under k,
// for c's own argv; it compares in constant time.
func (k AttachKey) Admit(nonce []byte, c AttachCommand) bool {
	mac, err := hex.DecodeString(c.MAC)
	return err == nil && len(mac) == MACSize && Admit(k, nonce, attachCommandRecord(c.Argv), mac)
}

// Next is the key of the next connection, once a command has been sent
// (runner) or admitted (node) on the connection whose hello had nonce.
func (k AttachKey) Next(nonce []byte) AttachKey {
	return Answer(k, nonce, []byte(attachNextLabel))
}

func attachCommandRecord(argv []string) []byte {
	b, _ := json.Marshal(argv)
	return append([]byte(attachCommandLabel), b...)
}

// NewAttachHello is node's hello for a connection under k, with a fresh
// nonce, which it returns to check the runner's answer with.
func NewAttachHello(k AttachKey, pid int) (AttachHello, []byte, error) {
	nonce := make([]byte, NonceSize)
	if err := NewNonce(nonce); err != nil {
		return AttachHello{}, nil, err
	}
	return AttachHello{ID: k.ID(), Nonce: hex.EncodeToString(nonce), Pid: pid}, nonce, nil
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

// AttachEndMarker starts the line `node attach --loop` writes on its
// stdout and stderr after each command; AttachEnd's text follows it. It
// may follow the command's own last bytes on the same line, when they
// did not end with a newline. Its first byte is a control character,
// which JSON escapes, so no event holds it.
const AttachEndMarker = "\x1frdmasweep-end:"

// AttachEnd is how a command of `node attach --loop` ended: its exit
// status, or the signal that killed it (Signal, a name such as "TERM",
// and Status -1).
type AttachEnd struct {
	Status int    `json:"status"`
	Signal string `json:"signal,omitempty"`
}
