package hostset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/agent"
	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/runner/hosts/role"
)

// Connect reaches every role's host and deploys node once per host.
func Connect(ctx context.Context, p *plan.Plan, o Options) (*Set, error) {
	if _, err := os.Stat(p.Node.Binary); err != nil {
		return nil, hint.Wrap(fmt.Errorf("node binary: %w", err), "build it with: make build (or set node.binary)")
	}
	s, err := Dial(ctx, p, o)
	if err != nil {
		return nil, err
	}
	if err := s.Deploy(ctx, p, o); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Dial reaches the roles' hosts in parallel, one connection per distinct
// host: roles written with the same address, port, user, key and jump
// share one. Local roles run node.binary in place; remote ones run
// node.remote_path. Nothing is deployed.
func Dial(ctx context.Context, p *plan.Plan, o Options) (*Set, error) {
	if p.Launcher == "slurm" {
		return slurmSet(ctx, p, o)
	}
	local, err := filepath.Abs(p.Node.Binary)
	if err != nil {
		return nil, err
	}
	specs := p.Hosts.Roles()
	conns := dialHosts(ctx, p, specs, o)
	s := &Set{}
	reached := 0
	for _, d := range conns {
		if d.err == nil {
			s.hosts = append(s.hosts, d.host)
			reached++
		}
	}
	keep := o.KeepUnreachable && p.IsPool() && ctx.Err() == nil && reached >= 2
	for _, r := range specs {
		d := conns[connKey(r.Host)]
		if d.err != nil {
			if !keep || refused(d.err) {
				s.Close()
				if keep {
					return nil, d.err // the host that refused, not one that is down
				}
				return nil, firstErr(specs, conns)
			}
			if s.Down == nil {
				s.Down = map[string]error{}
			}
			s.Down[r.Name] = d.err
			s.Roles = append(s.Roles, role.Target{Role: r.Name, Label: fmt.Sprintf("%s (%s)", r.Name, r.Host.Address)})
			continue
		}
		t := role.Target{Role: r.Name, Host: d.host, Label: fmt.Sprintf("%s (%s)", r.Name, d.host.Name()), NodePath: local}
		if !r.Host.IsLocal() {
			t.NodePath = p.Node.RemotePath
		}
		s.Roles = append(s.Roles, t)
	}
	if err := s.resolveNodePaths(ctx, p, nil); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// resolveNodePaths sets each remote host's node.remote_path (NodeBase)
// and its roles' NodePath: plan.UIDToken becomes the login's uid there,
// uid when not nil (a Slurm step runs as the runner's user), else what
// `id -u` prints on the host, one command per host.
func (s *Set) resolveNodePaths(ctx context.Context, p *plan.Plan, uid *int) error {
	ts := s.Targets()
	bases := make([]string, len(ts))
	err := Parallel(len(ts), func(i int) error {
		t := ts[i]
		if isLocal(t.Host) {
			return nil
		}
		bases[i] = p.Node.RemotePath
		if !p.Node.RemotePathPerUID() {
			return nil
		}
		if uid != nil {
			bases[i] = p.Node.RemotePathFor(*uid)
			return nil
		}
		out, err := t.Host.Run(ctx, []string{"id", "-u"})
		n, perr := strconv.Atoi(strings.TrimSpace(string(out)))
		if err == nil && perr != nil {
			err = fmt.Errorf("id -u printed %q", out)
		}
		if err != nil {
			return t.Errorf(role.Connect, "resolve node.remote_path %s: %w", p.Node.RemotePath, err)
		}
		bases[i] = p.Node.RemotePathFor(n)
		return nil
	})
	if err != nil {
		return err
	}
	s.base = map[remote.Host]string{}
	for i, t := range ts {
		if isLocal(t.Host) {
			continue
		}
		s.base[t.Host] = bases[i]
		for j := range s.Roles {
			if s.Roles[j].Host == t.Host {
				s.Roles[j].NodePath = bases[i]
			}
		}
	}
	return nil
}

// refused reports whether a dial failed because the host or the user was
// refused (a host key unknown, changed or revoked, a bad host
// certificate, no key the host takes, a name its ProxyCommand would not
// be given): the plan or the setup is wrong,
// not the host down, and the hint says how to fix it, so even a pool's
// exec stops there.
func refused(err error) bool {
	var (
		unknown *remote.UnknownHostError
		changed *remote.HostKeyChangedError
		revoked *remote.RevokedHostKeyError
		cert    *remote.HostCertError
		auth    *remote.AuthError
		pass    *remote.PassphraseError
	)
	return errors.As(err, &unknown) || errors.As(err, &changed) || errors.As(err, &revoked) ||
		errors.As(err, &cert) || errors.As(err, &auth) || errors.As(err, &pass) || errors.Is(err, remote.ErrUnsafeName)
}

// firstErr is the dial failure of the first role, in the plan's order,
// whose host was not reached.
func firstErr(specs []plan.Role, conns map[string]*dialed) error {
	for _, r := range specs {
		if d := conns[connKey(r.Host)]; d.err != nil {
			return d.err
		}
	}
	return nil
}

// dialed is one distinct host, reached or not.
type dialed struct {
	host remote.Host
	err  error
}

// connKey is what makes two roles' hosts one connection.
func connKey(h plan.Host) string {
	return fmt.Sprintf("%s|%d|%s|%s|%s", h.Address, h.Port, h.User, h.IdentityFile, h.Jump)
}

// dialHosts dials every distinct host of specs at once, by connKey.
func dialHosts(ctx context.Context, p *plan.Plan, specs []plan.Role, o Options) map[string]*dialed {
	conns := map[string]*dialed{}
	// Asked once for every host: a key's passphrase is prompted for on
	// the terminal, once; with none, ssh-agent must hold it.
	passphrase := remote.TerminalPassphrase()
	var wg sync.WaitGroup
	for _, r := range specs {
		k := connKey(r.Host)
		if conns[k] != nil {
			continue
		}
		d := &dialed{}
		conns[k] = d
		if r.Host.IsLocal() {
			d.host = remote.Local{}
			continue
		}
		wg.Add(1)
		go func(name string, h plan.Host) {
			defer wg.Done()
			s, err := remote.DialSSH(ctx, sshConfig(p, name, h, passphrase, o))
			switch {
			case err != nil:
				d.err = &role.Error{Role: name, Host: h.Address, Label: fmt.Sprintf("%s (%s)", name, h.Address), Phase: role.Connect, Err: err}
			case p.IsPool():
				// A round starts its pairs through agents, not a session
				// and a process each (runner/hosts/remote/agent).
				in := agent.InProcessRDMA
				if p.Transport() == results.TransportTCP { // transport is never swept
					in = agent.InProcessTCP
				}
				d.host = agent.NewSSH(s, in, func(msg string) { o.warn(fmt.Sprintf("%s (%s): %s", name, h.Address, msg)) })
			default:
				d.host = s
			}
		}(r.Name, r.Host)
	}
	wg.Wait()
	return conns
}

// sshConfig is how role name reaches host h: the host's own fields, the
// plan's ssh section, and messages labelled with the role.
func sshConfig(p *plan.Plan, name string, h plan.Host, passphrase func(keyFile string) ([]byte, error), o Options) remote.SSHConfig {
	label := name + " (" + h.Address + ")"
	debug := func(string) {}
	if o.Debug != nil {
		debug = func(msg string) { o.Debug(label + ": " + msg) }
	}
	return remote.SSHConfig{
		Address:           h.Address,
		Port:              h.Port,
		User:              h.User,
		IdentityFile:      h.IdentityFile,
		Jump:              h.Jump,
		KnownHosts:        p.SSH.KnownHosts,
		HostKeyPolicy:     p.SSH.HostKeyPolicy,
		AcceptNewHostKeys: o.AcceptNewHostKeys,
		ConnectTimeout:    p.SSH.ConnectTimeout,
		KeepaliveInterval: p.SSH.KeepaliveInterval,
		Warn:              func(msg string) { o.warn(label + ": " + msg) },
		Debug:             debug,
		Passphrase:        passphrase,
	}
}

// slurmSet makes each role a node of the allocation the runner runs in:
// its commands are job steps there (runner/hosts/remote/slurm), bound to the
// role's CPUs by Slurm itself, so argv carries no taskset. Roles on one
// node with the same CPUs share a Host.
func slurmSet(ctx context.Context, p *plan.Plan, o Options) (*Set, error) {
	a, err := slurm.FromEnv(ctx, os.Environ())
	if err != nil {
		return nil, hint.Wrap(err, "run the runner under salloc, srun or in an sbatch script, or use launcher: ssh")
	}
	s := &Set{}
	shared := map[string]*slurm.Host{}
	for _, r := range p.Hosts.Roles() {
		k := r.Host.Address + "|" + r.Host.CPUs
		h := shared[k]
		if h == nil {
			label := fmt.Sprintf("%s (%s)", r.Name, r.Host.Address)
			if h, err = a.Host(r.Host.Address, slurm.HostOptions{CPUs: r.Host.CPUs, Log: func(line string) { o.info(label + ": " + line) }}); err != nil {
				s.Close()
				return nil, &role.Error{Role: r.Name, Host: r.Host.Address, Label: label, Phase: role.Connect, Err: err}
			}
			shared[k] = h
			s.hosts = append(s.hosts, h)
		}
		s.Roles = append(s.Roles, role.Target{Role: r.Name, Host: h, Label: fmt.Sprintf("%s (%s)", r.Name, h.Name()), NodePath: p.Node.RemotePath, PinsCPUs: true})
	}
	uid := os.Getuid()
	if err := s.resolveNodePaths(ctx, p, &uid); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
