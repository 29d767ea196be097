// Package hostset connects to a plan's hosts and deploys node to them:
// each role's host dialled once however many roles share it (over SSH, in
// place for local roles, or as a node of the runner's own Slurm
// allocation), the node of the build for each host's architecture chosen
// before anything is uploaded, and uploaded once per host. What the
// runner then does per role or per host (facts, checks, reaping) it does
// on all of them at once, with Set.EachRole and Set.EachHost.
//
// The package never prints: what it did and what it warns of go to the
// caller's Options.Info and Options.Warn, and an error that the user can
// act on carries a hint (runner/hint).
package hostset

import (
	"slices"
	"sync"

	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// Set is the roles of a plan, connected, and with node in place once
// deployed, in the plan's order: the server first.
type Set struct {
	// Roles are the plan's roles, each with its host and node's path
	// there.
	Roles []role.Target
	hosts []remote.Host // unique, to close
	// Nodes is the node of the build each host got, chosen by its
	// architecture; set by Deploy.
	Nodes map[remote.Host]deploy.Node
	// Down holds, by role name, why a host could not be reached, when
	// Options.KeepUnreachable let the connect go on without it: its
	// role's Target has a nil Host, and EachRole, EachHost and Targets
	// leave it out.
	Down map[string]error
	// base is node.remote_path on each remote host, its {uid} resolved
	// (see NodeBase).
	base map[remote.Host]string
}

// NodeBase is node.remote_path on h, with plan.UIDToken replaced by the
// uid h's login has there: node.binary's own architecture goes there,
// and a sibling's beside it (deploy.Node.RemotePath).
func (s *Set) NodeBase(h remote.Host) string { return s.base[h] }

// Options are how a Set reports what it does.
type Options struct {
	Info func(msg string) // what it did: "server (a): deployed node to …"
	Warn func(msg string) // what the user should know: a host key learnt
	// Debug, when set, gets the SSH client's own trace, one line a call.
	Debug func(msg string)
	// Chosen, when set, is called once for every distinct node the hosts
	// get, after all are chosen and before any upload.
	Chosen func(n deploy.Node)
	// KeepUnreachable makes a pool plan's connect go on without the
	// hosts it cannot reach (Set.Down), as long as two are reached: a
	// pool sweep fails their pairs and measures the others. Other plans,
	// a cancelled ctx, and a host that refuses the runner (its host key,
	// or no key it takes) still fail the connect.
	KeepUnreachable bool
	// AcceptNewHostKeys is --accept-new-host-keys: a host not yet in
	// known_hosts is trusted and added, unless the plan's
	// ssh.host_key_policy says otherwise (remote.SSHConfig).
	AcceptNewHostKeys bool
}

func (o Options) info(msg string) {
	if o.Info != nil {
		o.Info(msg)
	}
}

func (o Options) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

// Close closes the connection to every host.
func (s *Set) Close() {
	for _, h := range s.hosts {
		_ = h.Close()
	}
}

// Get returns the named role's target; a name the plan lacks is a bug.
func (s *Set) Get(name string) role.Target {
	for _, t := range s.Roles {
		if t.Role == name {
			return t
		}
	}
	panic("hostset: no role " + name)
}

// Targets are the roles with one per host: deploying, reaping and
// cleaning node happen once per host. A host that is down is not one.
func (s *Set) Targets() []role.Target {
	var out []role.Target
	for _, t := range s.Roles {
		if t.Host != nil && !slices.ContainsFunc(out, func(o role.Target) bool { return o.Host == t.Host }) {
			out = append(out, t)
		}
	}
	return out
}

// EachRole runs fn for every role whose host is up at once, i its index
// in Roles, and returns the first failure in the roles' order, or nil.
func (s *Set) EachRole(fn func(i int, t role.Target) error) error {
	return Parallel(len(s.Roles), func(i int) error {
		if s.Roles[i].Host == nil {
			return nil
		}
		return fn(i, s.Roles[i])
	})
}

// EachHost runs fn for every host (Targets) at once and returns the first
// failure in their order, or nil.
func (s *Set) EachHost(fn func(i int, t role.Target) error) error {
	ts := s.Targets()
	return Parallel(len(ts), func(i int) error { return fn(i, ts[i]) })
}

// Parallel runs fn(0) … fn(n-1) at once and returns the first error in
// that order, or nil: a command reports one failure, with its own hint.
func Parallel(n int, fn func(i int) error) error {
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
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// isLocal reports whether h is this machine, where node runs in place.
func isLocal(h remote.Host) bool {
	_, ok := h.(remote.Local)
	return ok
}
