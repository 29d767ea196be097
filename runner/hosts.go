package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/deploy"
	"rdmasweep/runner/hostfacts"
	"rdmasweep/runner/leftover"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/remote/slurm"
	"rdmasweep/runner/role"
)

// roles are the roles of an exec, connected and with node in place, in
// the plan's order: the server first.
type roles struct {
	list  []role.Target
	hosts []remote.Host // unique, to close
	// nodes is the node of the build each host got, chosen by its
	// architecture; set by deploy.
	nodes map[remote.Host]deploy.Node
}

func (r *roles) close() {
	for _, h := range r.hosts {
		_ = h.Close()
	}
}

// get returns the named role's target.
func (r *roles) get(name string) role.Target {
	for _, t := range r.list {
		if t.Role == name {
			return t
		}
	}
	panic("runner: no role " + name)
}

// targets are the roles with one per host: deploying, reaping and
// cleaning node happen once per host.
func (r *roles) targets() []role.Target {
	var out []role.Target
	for _, t := range r.list {
		if !slices.ContainsFunc(out, func(o role.Target) bool { return o.Host == t.Host }) {
			out = append(out, t)
		}
	}
	return out
}

// parallel runs fn(0) … fn(n-1) at once and returns the errors of the
// ones that failed, in order: what the runner does per role or host
// (deploy, facts, checks) it does on every one at the same time.
func parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// connect reaches every role's host and deploys node once per host.
func connect(ctx context.Context, p *plan.Plan, ui *voice) (*roles, error) {
	if _, err := os.Stat(p.Node.Binary); err != nil {
		return nil, withHint(fmt.Errorf("node binary: %w", err), "build it with: make build (or set node.binary)")
	}
	r, err := dialRoles(ctx, p, ui)
	if err != nil {
		return nil, err
	}
	if err := r.deploy(ctx, p, ui); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// dialRoles reaches both roles' hosts in parallel, one connection per
// distinct host: roles written with the same address, port, user, key and
// jump share one. Local roles run node.binary in place; remote ones run
// node.remote_path.
func dialRoles(ctx context.Context, p *plan.Plan, ui *voice) (*roles, error) {
	if p.Launcher == "slurm" {
		return slurmRoles(ctx, p, ui)
	}
	local, err := filepath.Abs(p.Node.Binary)
	if err != nil {
		return nil, err
	}
	specs := p.Hosts.Roles()
	type dialed struct {
		host remote.Host
		err  error
	}
	keyOf := func(h plan.Host) string {
		return fmt.Sprintf("%s|%d|%s|%s|%s", h.Address, h.Port, h.User, h.IdentityFile, h.Jump)
	}
	conns := map[string]*dialed{}
	// Asked once for both hosts: a key's passphrase is prompted for on
	// the terminal, once; with none, ssh-agent must hold it.
	passphrase := remote.TerminalPassphrase()
	debug := func(string) {}
	if os.Getenv("RDMASWEEP_SSH_DEBUG") != "" {
		debug = func(msg string) { ui.infof("ssh: %s", msg) }
	}
	var wg sync.WaitGroup
	for _, s := range specs {
		k := keyOf(s.Host)
		if conns[k] != nil {
			continue
		}
		d := &dialed{}
		conns[k] = d
		if s.Host.IsLocal() {
			d.host = remote.Local{}
			continue
		}
		wg.Add(1)
		go func(name string, h plan.Host) {
			defer wg.Done()
			d.host, d.err = remote.DialSSH(ctx, remote.SSHConfig{
				Address:           h.Address,
				Port:              h.Port,
				User:              h.User,
				IdentityFile:      h.IdentityFile,
				Jump:              h.Jump,
				KnownHosts:        p.SSH.KnownHosts,
				HostKeyPolicy:     p.SSH.HostKeyPolicy,
				ConnectTimeout:    p.SSH.ConnectTimeout,
				KeepaliveInterval: p.SSH.KeepaliveInterval,
				Warn:              func(msg string) { ui.warnf("%s (%s): %s", name, h.Address, msg) },
				Debug:             func(msg string) { debug(name + " (" + h.Address + "): " + msg) },
				Passphrase:        passphrase,
			})
			if d.err != nil {
				d.err = &role.Error{Role: name, Host: h.Address, Label: fmt.Sprintf("%s (%s)", name, h.Address), Phase: role.Connect, Err: d.err}
			}
		}(s.Name, s.Host)
	}
	wg.Wait()

	r := &roles{}
	var firstErr error
	for _, d := range conns {
		if d.err != nil {
			if firstErr == nil {
				firstErr = d.err
			}
			continue
		}
		r.hosts = append(r.hosts, d.host)
	}
	if firstErr != nil {
		r.close()
		return nil, firstErr
	}
	for _, s := range specs {
		d := conns[keyOf(s.Host)]
		t := role.Target{Role: s.Name, Host: d.host, Label: fmt.Sprintf("%s (%s)", s.Name, d.host.Name()), NodePath: local}
		if !s.Host.IsLocal() {
			t.NodePath = p.Node.RemotePath
		}
		r.list = append(r.list, t)
	}
	return r, nil
}

// deploy gives every host the node of the build for its architecture
// (node.binary, or a node-linux-GOARCH beside it) and uploads it to every
// remote host once, in parallel. Every host's node is chosen before
// anything is uploaded, so a host no node runs on stops the exec before
// any host is touched.
func (r *roles) deploy(ctx context.Context, p *plan.Plan, ui *voice) error {
	nodes, err := deploy.FindNodes(p.Node.Binary)
	if err != nil {
		return withHint(err, "build the nodes with: make build (or set node.binary)")
	}
	targets := r.targets()
	chosen, arches := make([]deploy.Node, len(targets)), make([]string, len(targets))
	err = parallel(len(targets), func(i int) error {
		t := targets[i]
		arch := deploy.LocalUname()
		if _, isLocal := t.Host.(remote.Local); !isLocal {
			// The first command on the host: it also finds a host where
			// no shell runs, before anything is uploaded there.
			facts, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{})
			if err != nil {
				return t.Wrap(role.Facts, err)
			}
			arch = facts.Arch
		}
		n, err := nodes.For(arch)
		if err != nil {
			err := error(t.Wrap(role.Deploy, err))
			var no *deploy.NoNodeError
			if errors.As(err, &no) {
				err = withHint(err, no.Hint())
			}
			return err
		}
		chosen[i], arches[i] = n, arch
		return nil
	})
	if err != nil {
		return firstError(err)
	}
	r.nodes = map[remote.Host]deploy.Node{}
	for i, t := range targets {
		r.nodes[t.Host] = chosen[i]
		for j := range r.list {
			if r.list[j].Host != t.Host {
				continue
			}
			if _, isLocal := t.Host.(remote.Local); isLocal {
				r.list[j].NodePath = chosen[i].Path // run in place
			} else {
				r.list[j].NodePath = chosen[i].RemotePath(p.Node.RemotePath)
			}
		}
	}
	if p.Transport() == "rdma" {
		for _, n := range uniqueNodes(chosen) {
			warnNoRDMA(ui, n)
		}
	}
	targets = r.targets() // with their node paths
	return firstError(parallel(len(targets), func(i int) error {
		t := targets[i]
		if _, isLocal := t.Host.(remote.Local); isLocal {
			return nil
		}
		local := chosen[i]
		res, err := deploy.Deploy(ctx, t.Host, local.Path, t.NodePath, arches[i])
		switch {
		case err != nil:
			err := error(t.Errorf(role.Deploy, "deploy node to %s: %w", t.NodePath, err))
			if hint := diskHint(ctx, t.Host, local.Path, t.NodePath); hint != "" {
				err = withHint(err, hint)
			}
			return err
		case res.UpToDate:
			ui.infof("%s: node at %s is up to date", t.Label, t.NodePath)
		default:
			ui.infof("%s: deployed node to %s (%d bytes sent)", t.Label, t.NodePath, res.BytesSent)
		}
		return nil
	}))
}

func uniqueNodes(ns []deploy.Node) []deploy.Node {
	var out []deploy.Node
	for _, n := range ns {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// firstError is the first of errors.Join's errors, or err itself: a
// command reports one failure, with its own hint.
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()[0]
	}
	return err
}

// openLeftovers opens the leftover record beside the CSV and reaps what an
// earlier exec left running.
func openLeftovers(ctx context.Context, path string, r *roles, ui *voice) (*leftover.Record, error) {
	return leftover.Open(ctx, path, r.targets(), func(msg string) { ui.infof("%s", msg) })
}

// diskHint explains a failed upload when the host lacks the room for node:
// SFTP reports a full disk only as "Failure". It returns "" when it cannot
// tell or there is room.
func diskHint(ctx context.Context, h remote.Host, local, remotePath string) string {
	st, err := os.Stat(local)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The directory may not exist; df the nearest one that does.
	for dir := path.Dir(remotePath); ; dir = path.Dir(dir) {
		out, err := h.Run(ctx, []string{"df", "-Pk", dir})
		if err == nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			f := strings.Fields(lines[len(lines)-1])
			if len(f) < 4 {
				return ""
			}
			availKiB, err := strconv.ParseInt(f[3], 10, 64)
			needKiB := (st.Size() + 1023) / 1024
			if err != nil || availKiB >= needKiB {
				return ""
			}
			return fmt.Sprintf("the host's disk is full: %d KiB free in %s, node needs %d KiB; free space there, or set node.remote_path", availKiB, dir, needKiB)
		}
		if dir == "/" || ctx.Err() != nil {
			return ""
		}
	}
}

// slurmRoles makes each role a node of the allocation the runner runs in:
// its commands are job steps there (runner/remote/slurm), bound to the
// role's CPUs by Slurm itself, so argv carries no taskset. Roles on one
// node with the same CPUs share a Host.
func slurmRoles(ctx context.Context, p *plan.Plan, ui *voice) (*roles, error) {
	a, err := slurm.FromEnv(ctx, os.Environ())
	if err != nil {
		return nil, withHint(err, "run the runner under salloc, srun or in an sbatch script, or use launcher: ssh")
	}
	r := &roles{}
	shared := map[string]*slurm.Host{}
	for _, s := range p.Hosts.Roles() {
		k := s.Host.Address + "|" + s.Host.CPUs
		h := shared[k]
		if h == nil {
			name := s.Name
			if h, err = a.Host(s.Host.Address, slurm.HostOptions{CPUs: s.Host.CPUs, Log: func(line string) { ui.infof("%s (%s): %s", name, s.Host.Address, line) }}); err != nil {
				r.close()
				return nil, &role.Error{Role: s.Name, Host: s.Host.Address, Label: fmt.Sprintf("%s (%s)", s.Name, s.Host.Address), Phase: role.Connect, Err: err}
			}
			shared[k] = h
			r.hosts = append(r.hosts, h)
		}
		r.list = append(r.list, role.Target{Role: s.Name, Host: h, Label: fmt.Sprintf("%s (%s)", s.Name, h.Name()), NodePath: p.Node.RemotePath, PinsCPUs: true})
	}
	return r, nil
}
