package agent

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"rdmasweep/runner/hosts/remote"
)

// closeWait bounds how long SSH.Close waits for its agents to end once
// their stdin is closed, before it kills them.
const closeWait = 2 * time.Second

// What SSH agents run in their own process (node attach --in-process):
// over tcp both roles, so that a round starts no process at all; over
// rdma node serve stays a child, as under Slurm, since the kernel's
// cleanup of its memory regions when it exits is the one the guest tests
// check, and a long-lived agent would hold what a serve left registered.
const (
	InProcessTCP  = "read,serve"
	InProcessRDMA = "read"
)

// SSH is an SSH host whose node commands, started through Prestart, run
// in agents. An agent runs in a session of its own (the connection's
// kept shell, taken over: see Launch), whose stdin carries its token and
// whose end ends it, so that no agent outlives the runner's
// connection; it dials the runner back through a port the host's sshd
// listens on, on its loopback (remote.SSH.ListenLoopback), which needs
// no route from the host to the runner and works through jump hosts.
// Everything else (Run, Start, Upload, Name, Machine) is the SSH host's
// own. It is safe for concurrent use.
type SSH struct {
	*remote.SSH
	pool      *Pool
	tokens    Tokens
	inProcess string           // node attach --in-process
	warn      func(msg string) // told once if the host refuses the forward

	lnOnce sync.Once
	ln     net.Listener
	addr   string // the listener's address on the host
	lnErr  error
}

var _ remote.Prestarter = (*SSH)(nil)

// NewSSH runs s's node commands in agents, inProcess (InProcessTCP or
// InProcessRDMA) in the agent's own process. warn, if not nil, is told
// once when the host's sshd refuses the forward the agents need.
func NewSSH(s *remote.SSH, inProcess string, warn func(msg string)) *SSH {
	h := &SSH{SSH: s, inProcess: inProcess, warn: warn}
	h.pool = NewPool(sshLauncher{h}, &h.tokens)
	return h
}

// Prestart hands out an idle agent for path, or launches one. A host
// whose sshd refuses to forward (AllowTcpForwarding no, as hardened
// sites set it) runs each command in a session of its own, as outside a
// pool sweep: slower rounds, the same rows.
func (h *SSH) Prestart(ctx context.Context, path string) remote.Pending {
	if _, err := (sshLauncher{h}).Address(ctx); err != nil {
		return &session{h: h.SSH}
	}
	return h.pool.Prestart(ctx, path)
}

// session is a Pending that starts its command in a session of its own.
type session struct{ h *remote.SSH }

func (s *session) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return s.h.Start(ctx, argv)
}

func (s *session) Close() error { return nil }

// Close ends the agents, then the connection.
func (h *SSH) Close() error {
	h.pool.Close(closeWait, func(p remote.Process) { p.Signal(syscall.SIGKILL) })
	if h.ln != nil {
		h.ln.Close()
	}
	return h.SSH.Close()
}

// sshLauncher launches SSH's agents.
type sshLauncher struct{ h *SSH }

func (l sshLauncher) Name() string { return l.h.Name() }

func (l sshLauncher) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return l.h.SSH.Start(ctx, argv)
}

// Address starts the host's listener on first use.
func (l sshLauncher) Address(ctx context.Context) (string, error) {
	h := l.h
	h.lnOnce.Do(func() {
		if h.ln, h.lnErr = h.SSH.ListenLoopback(); h.lnErr == nil {
			h.addr = h.ln.Addr().String()
			go h.tokens.Serve(h.ln)
			h.checkExposed(ctx)
		} else if h.warn != nil {
			h.warn(fmt.Sprintf("%v; each of its roles starts a session and a node of its own, which makes a round slower (docs/scale.md)", h.lnErr))
		}
	})
	return h.addr, h.lnErr
}

// checkExposed warns when the host's sshd bound the agents' forward to
// every address (GatewayPorts yes) rather than the loopback asked for:
// then any host that reaches this one can open connections to the
// runner's listener. The agents still obey only the runner, and the
// listener bounds the connections that have not said hello, but the
// user should know. One session, once per host.
func (h *SSH) checkExposed(ctx context.Context) {
	if h.warn == nil {
		return
	}
	wide, err := h.SSH.LoopbackExposed(ctx, h.ln)
	if err != nil || len(wide) == 0 {
		return // not Linux, or as asked: nothing to say
	}
	h.warn(fmt.Sprintf("sshd bound the agents' forwarded port %d to %v, not to the loopback alone (GatewayPorts yes in sshd_config?): any host that reaches this one can connect to the runner through it; the agents still obey only the runner (docs/security.md)",
		h.ln.Addr().(*net.TCPAddr).Port, wide))
}

// Launch starts the agent and hands it its token on stdin. It takes over
// the connection's idle kept shell (remote.SSH.StartInShell) rather than
// opening a session: each session runs the user's login shell, whose
// ~/.bashrc may take half a second, and nothing runs on the host after
// its agent starts but through the agent (its facts, deploy check, clock
// and socket table come before). So a host costs one session in a pool
// exec, plus the upload's sftp where node is deployed. The session is
// the agent's all the same: its stdin carries the token, and its end,
// with the runner's connection, ends the agent.
func (l sshLauncher) Launch(ctx context.Context, path, addr, token string) (remote.Process, error) {
	p, err := l.h.SSH.StartInShell(ctx, []string{path, "attach", "--runner", addr, "--loop", "--token-stdin", "--in-process", l.h.inProcess})
	if err != nil {
		return nil, err
	}
	// A failed write means it is gone; its end says why.
	_, _ = p.Stdin().Write([]byte(token + "\n"))
	return p, nil
}
