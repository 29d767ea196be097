package main

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/deploy"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/sweep"
)

// roles are the two ends of an exec, connected and with node in place.
type roles struct {
	server, client sweep.Target
	hosts          []remote.Host // unique, to close
}

func (r *roles) close() {
	for _, h := range r.hosts {
		_ = h.Close()
	}
}

func (r *roles) targets() []sweep.Target {
	if r.server.Host == r.client.Host {
		return []sweep.Target{r.server}
	}
	return []sweep.Target{r.server, r.client}
}

// connect reaches both roles' hosts and deploys node once per host.
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
	local, err := filepath.Abs(p.Node.Binary)
	if err != nil {
		return nil, err
	}
	specs := []struct {
		role string
		h    plan.Host
	}{{"server", p.Hosts.Server}, {"client", p.Hosts.Client}}
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
		k := keyOf(s.h)
		if conns[k] != nil {
			continue
		}
		d := &dialed{}
		conns[k] = d
		if s.h.IsLocal() {
			d.host = remote.Local{}
			continue
		}
		wg.Add(1)
		go func(role string, h plan.Host) {
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
				Warn:              func(msg string) { ui.warnf("%s (%s): %s", role, h.Address, msg) },
				Debug:             func(msg string) { debug(role + " (" + h.Address + "): " + msg) },
				Passphrase:        passphrase,
			})
			if d.err != nil {
				d.err = fmt.Errorf("%s (%s): %w", role, h.Address, d.err)
			}
		}(s.role, s.h)
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
		d := conns[keyOf(s.h)]
		t := sweep.Target{Host: d.host, Label: fmt.Sprintf("%s (%s)", s.role, d.host.Name()), NodePath: local}
		if !s.h.IsLocal() {
			t.NodePath = p.Node.RemotePath
		}
		if s.role == "server" {
			r.server = t
		} else {
			r.client = t
		}
	}
	return r, nil
}

// deploy uploads node.binary to every remote host once, in parallel.
func (r *roles) deploy(ctx context.Context, p *plan.Plan, ui *voice) error {
	local, err := filepath.Abs(p.Node.Binary)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		errs = make([]error, 2)
	)
	for i, t := range r.targets() {
		if _, isLocal := t.Host.(remote.Local); isLocal {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := deploy.Deploy(ctx, t.Host, local, t.NodePath)
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("%s: deploy node to %s: %w", t.Label, t.NodePath, err)
				if hint := diskHint(ctx, t.Host, local, t.NodePath); hint != "" {
					errs[i] = withHint(errs[i], hint)
				}
			case res.UpToDate:
				ui.infof("%s: node at %s is up to date", t.Label, t.NodePath)
			default:
				ui.infof("%s: deployed node to %s (%d bytes sent)", t.Label, t.NodePath, res.BytesSent)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// openState opens the state file beside the CSV and reaps leftovers.
func openState(ctx context.Context, path string, r *roles, ui *voice) (*sweep.State, error) {
	return sweep.OpenState(ctx, path, r.targets(), func(msg string) { ui.infof("%s", msg) })
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
