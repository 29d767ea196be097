package remote

import "context"

// Prestarter is a Host that can start node before its command line is
// known, and hand it the command line later in far less time than a start
// takes. Slurm is one: a step takes tens to hundreds of milliseconds to
// start, so the point runner starts a point's clients while their server
// starts, and gives each its command line once the server's port is
// known. A Prestarter may serve a Prestart with a node it started for an
// earlier one, whose command has ended: Slurm starts one step per host
// and role for a whole run. The SSH hosts of a pairwise or ring sweep
// are Prestarters too (runner/hosts/remote/agent): a round starts N/2 pairs
// at once, and a session and a node per role cost more than the round.
// Other SSH hosts and Local ones, whose one start is cheap, do not
// implement it.
type Prestarter interface {
	// Prestart starts node, the binary at path on the host, waiting for
	// its command line, and returns at once; the start goes on in the
	// background under ctx. The caller must end the Pending with Start
	// or Close.
	Prestart(ctx context.Context, path string) Pending
}

// Pending is a node started by Prestart that waits for its command line.
type Pending interface {
	// Start hands node argv (argv[0] the path given to Prestart) and
	// returns the running process, as Host.Start does; its Stdin is node's
	// control channel, delivered at once. It waits for the background
	// start to finish, within ctx. An argv for another program is started
	// with Host.Start, and the waiting node stopped. Start may be called
	// once.
	Start(ctx context.Context, argv []string) (Process, error)
	// Close gives back a node that was never given its command line. The
	// host may stop it, or keep it for a later Prestart until the host's
	// own Close (Slurm keeps it: a step costs more than a point). After
	// Start it does nothing.
	Close() error
}
