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
//   - Once a command has started it dials again with the same token and
//     hello, for the next command, which the runner sends only after it
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
	Token string `json:"token"`
	Pid   int    `json:"pid"`
}

// AttachCommand is the runner's first line to an attached node.
type AttachCommand struct {
	Argv []string `json:"argv"`
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
