package results

// The attach handshake: how a launcher that starts node before its command
// line is known (Slurm, whose steps take long to start and whose stdin is
// slow to deliver) hands node that command line, and then its control
// lines, over a TCP connection node opens to the runner.
//
//   - The runner listens, and starts `node attach --runner HOST:PORT` with
//     a fresh token in node's environment (AttachTokenEnv): an
//     environment is readable only by its own user, a command line by
//     anyone on the host.
//   - node dials HOST:PORT and sends one AttachHello line with the token.
//     The runner drops a connection whose token it did not give out.
//   - The runner sends one AttachCommand line, when it knows the command:
//     node's subcommand and flags, without the binary's path.
//   - The connection is then the subcommand's control channel, exactly as
//     stdin is under --control-stdin: Control lines, and its end means
//     stop.
//
// Nothing else flows, and node writes nothing after its hello: its events
// still go to its stdout.

// AttachTokenEnv names the environment variable that carries node
// attach's token.
const AttachTokenEnv = "RDMASWEEP_ATTACH_TOKEN"

// MaxAttachLine bounds the hello and the command line of the handshake.
const MaxAttachLine = 64 << 10

// AttachHello is node attach's first and only line to the runner.
type AttachHello struct {
	Token string `json:"token"`
	Pid   int    `json:"pid"`
}

// AttachCommand is the runner's first line to an attached node.
type AttachCommand struct {
	Argv []string `json:"argv"`
}
