package hostset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// Deploy gives every host the node of the build for its architecture
// (node.binary, or a node-linux-GOARCH beside it) and uploads it to every
// remote host once, in parallel. Every host's node is chosen before
// anything is uploaded, so a host no node runs on stops the exec before
// any host is touched.
func (s *Set) Deploy(ctx context.Context, p *plan.Plan, o Options) error {
	nodes, err := deploy.FindNodes(p.Node.Binary)
	if err != nil {
		return hint.Wrap(err, "build the nodes with: make build (or set node.binary)")
	}
	chosen, arches, err := s.choose(ctx, nodes)
	if err != nil {
		return err
	}
	s.place(p, chosen)
	if o.Chosen != nil {
		for _, n := range uniqueNodes(chosen) {
			o.Chosen(n)
		}
	}
	return s.EachHost(func(i int, t role.Target) error { // with their node paths
		if isLocal(t.Host) {
			return nil
		}
		return upload(ctx, t, chosen[i], arches[i], o)
	})
}

// choose picks each host's node (in Targets order) by the architecture
// the host reports: the first command on it, which also finds a host
// where no shell runs before anything is uploaded there.
func (s *Set) choose(ctx context.Context, nodes deploy.Nodes) (chosen []deploy.Node, arches []string, err error) {
	n := len(s.Targets())
	chosen, arches = make([]deploy.Node, n), make([]string, n)
	err = s.EachHost(func(i int, t role.Target) error {
		arch := deploy.LocalUname()
		if !isLocal(t.Host) {
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
				err = hint.Wrap(err, no.Hint())
			}
			return err
		}
		chosen[i], arches[i] = n, arch
		return nil
	})
	return chosen, arches, err
}

// place sets every role's node path to its host's chosen node: the file
// itself on this machine, run in place; its remote path elsewhere.
func (s *Set) place(p *plan.Plan, chosen []deploy.Node) {
	s.Nodes = map[remote.Host]deploy.Node{}
	for i, t := range s.Targets() {
		s.Nodes[t.Host] = chosen[i]
		for j := range s.Roles {
			if s.Roles[j].Host != t.Host {
				continue
			}
			if isLocal(t.Host) {
				s.Roles[j].NodePath = chosen[i].Path
			} else {
				s.Roles[j].NodePath = chosen[i].RemotePath(s.NodeBase(t.Host))
			}
		}
	}
}

// upload puts node n on t's host at t.NodePath, unless it is there.
func upload(ctx context.Context, t role.Target, n deploy.Node, arch string, o Options) error {
	res, err := deploy.Deploy(ctx, t.Host, n.Path, t.NodePath, arch)
	switch {
	case err != nil:
		err := error(t.Errorf(role.Deploy, "deploy node to %s: %w", t.NodePath, err))
		if h := diskHint(ctx, t.Host, n.Path, t.NodePath); h != "" {
			err = hint.Wrap(err, h)
		}
		return err
	case res.UpToDate:
		o.info(fmt.Sprintf("%s: node at %s is up to date", t.Label, t.NodePath))
	default:
		o.info(fmt.Sprintf("%s: deployed node to %s (%d bytes sent)", t.Label, t.NodePath, res.BytesSent))
	}
	return nil
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
