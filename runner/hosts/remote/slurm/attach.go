package slurm

// Prestart: node started as a step before its command line is known, which
// it then takes over a TCP connection of its own to the runner, with its
// control lines, and over which it sends its output back, all sealed
// under keys drawn from a token the step's environment carries as a MUNGE
// credential (results/attach.go has the protocol). A step takes tens
// to hundreds of milliseconds to start, and srun's stdin delivered lines up
// to 0.36 s late; a line on node's own connection arrives in well under a
// millisecond.
//
// The step is `node attach --loop`, an agent (runner/hosts/remote/agent): it
// runs one command after another, each over a connection of its own,
// which ends with the command's exit status. When a command has
// ended its agent goes back to its Host, idle, and the next Prestart of
// the same binary there takes it: a run's points after the first start
// no step at all. On this
// 2-core machine a step costs about 70 ms when started alone and 0.58 s
// for nine started together (a fan-in of 8), more than a point's budget.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
)

var _ remote.Prestarter = (*Host)(nil)

// attachAddr is the address node on the given node dials to attach: the
// runner's own address on the route to that node, where a listener
// (started on first use, for the runner's life) listens on that address
// alone, not on every interface: one listener per address the
// allocation's nodes reach the runner at.
func (a *Allocation) attachAddr(ctx context.Context, node string) (string, error) {
	a.mu.Lock()
	addr, ok := a.localAddr[node]
	a.mu.Unlock()
	if ok {
		return addr, nil
	}
	// The address the kernel would send from to the node is one the node
	// reaches the runner at (routes are symmetric on a cluster's network).
	// A UDP "connection" sends nothing.
	c, err := net.Dial("udp", net.JoinHostPort(a.NodeAddr(ctx, node), "9"))
	if err != nil {
		return "", fmt.Errorf("find the runner's address on the route to %s: %w", node, err)
	}
	ip := c.LocalAddr().(*net.UDPAddr).IP.String()
	c.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.localAddr == nil {
		a.localAddr, a.listeners = map[string]string{}, map[string]net.Listener{}
	}
	ln, ok := a.listeners[ip]
	if !ok {
		if ln, err = net.Listen(results.Network, net.JoinHostPort(ip, "0")); err != nil {
			return "", fmt.Errorf("listen on %s for nodes to attach: %w", ip, err)
		}
		a.listeners[ip] = ln
		go a.tokens.Serve(ln)
	}
	addr = ln.Addr().String()
	a.localAddr[node] = addr
	return addr, nil
}

// AttachAddrs is where the runner listens for its nodes to attach: one
// address per route to the allocation's nodes, never a wildcard.
func (a *Allocation) AttachAddrs() []net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	var addrs []net.Addr
	for _, ln := range a.listeners {
		addrs = append(addrs, ln.Addr())
	}
	return addrs
}

// Prestart hands out an idle agent of this Host for path, or starts a new
// one in the background.
func (h *Host) Prestart(ctx context.Context, path string) remote.Pending {
	return h.pool.Prestart(ctx, path)
}

// launcher launches a Host's agents as steps.
type launcher struct{ h *Host }

func (l launcher) Name() string { return l.h.node }

func (l launcher) Address(ctx context.Context) (string, error) {
	return l.h.a.attachAddr(ctx, l.h.node)
}

// Launch starts the agent as a step. Its token goes in the step's
// environment only as a MUNGE credential: srun sends that environment
// to slurmd in the clear, and the credential's payload is encrypted under
// the cluster's MUNGE key and decodes only for the runner's UID.
func (l launcher) Launch(ctx context.Context, path, addr, token string) (remote.Process, error) {
	cred, socket, err := l.h.a.attachCred(ctx, token)
	if err != nil {
		return nil, err
	}
	argv := []string{path, "attach", "--runner", addr, "--loop"}
	if socket != "" {
		argv = append(argv, "--munge-socket", socket)
	}
	p, err := l.h.launch(ctx, argv, false, results.AttachCredEnv+"="+cred)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// attachCred is token as a MUNGE credential (`munge --restrict-uid`,
// aes128) that only a process of the runner's UID decodes, on a host
// that holds the cluster's key; and the munged socket it was made with,
// Slurm's AuthInfo socket=, which node's unmunge uses too.
func (a *Allocation) attachCred(ctx context.Context, token string) (cred, socket string, err error) {
	a.mu.Lock()
	socket, known := a.mungeSocket, a.mungeKnown
	a.mu.Unlock()
	if !known {
		if socket, err = a.authSocket(ctx); err != nil {
			return "", "", err
		}
		a.mu.Lock()
		a.mungeSocket, a.mungeKnown = socket, true
		a.mu.Unlock()
	}
	args := []string{"--restrict-uid=" + strconv.Itoa(os.Getuid()), "--cipher=aes128"}
	if socket != "" {
		args = append(args, "--socket="+socket)
	}
	cmd := a.command(ctx, "munge", args...)
	cmd.Stdin = strings.NewReader(token) // never in argv: ps shows that to every user
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("hand node its token as a MUNGE credential: munge: %w: %s (under Slurm the runner needs MUNGE's munge command, docs/security.md)", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), socket, nil
}

// authSocket is the munged socket Slurm's AuthInfo names (socket=PATH),
// or "" for MUNGE's default.
func (a *Allocation) authSocket(ctx context.Context) (string, error) {
	out, err := a.output(ctx, "scontrol", "show", "config")
	if err != nil {
		return "", fmt.Errorf("read slurm's AuthInfo: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != "AuthInfo" {
			continue
		}
		for _, opt := range strings.Split(strings.TrimSpace(v), ",") {
			if path, ok := strings.CutPrefix(strings.TrimSpace(opt), "socket="); ok {
				return path, nil
			}
		}
	}
	return "", nil
}

func (l launcher) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return l.h.Start(ctx, argv)
}
