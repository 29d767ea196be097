// Package plan turns a YAML experiment plan into validated, ordered points.
//
// Load reads a plan, applies --set assignments, fills defaults and checks
// everything it can, reporting every problem at once as an ErrorList in
// compiler form (file:line:col: field.path: message). Expand then crosses
// the sweep into Points, each with a stable key that the runner uses to
// match CSV rows across runs.
//
// The parameters (the fields of server:, client:, rdma: and the top level's
// transport) are results' schema: their names, types, defaults and limits
// come from there, and a point holds their values by name (Values). The
// other fields (hosts, ssh, node, timeouts, output) are this package's.
//
// The plan is parsed into a yaml.Node tree and walked by hand: yaml.v3's
// strict decoding loses positions and field paths, and stops at the first
// duplicate key.
package plan

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"rdmasweep/results/param"
)

// Options are the command-line inputs to Load.
type Options struct {
	// Set holds "name=value" assignments from --set. name is a parameter
	// name (block_size), or a dotted path to any other field
	// (ssh.connect_timeout, hosts.server.address, server.file). The value
	// is read as a YAML scalar, so "64KiB", "true" and "5s" mean what they
	// would in the file. Setting a swept parameter replaces its sweep with
	// that single value; if that empties sweep.zip or the whole sweep,
	// they go too. Later assignments to the same name win.
	Set []string
	// Allocation lists the nodes of the Slurm allocation the runner runs
	// in, for a plan with launcher: slurm (its hosts are those nodes); it
	// is called only for such a plan, and may be nil otherwise.
	Allocation func() ([]string, error)
	// NodeBinary is node.binary when the plan does not say; the runner
	// passes the node file beside its own executable. When both are empty,
	// Node.Binary stays empty.
	NodeBinary string
}

// Plan is a loaded, validated plan with defaults filled in. Base holds
// the parameters' values before the sweep; Expand applies the sweep over
// them.
type Plan struct {
	Path, Name, Description string
	Source                  []byte // the raw file bytes
	Launcher                string // ssh (default) or slurm: how the roles are started
	Hosts                   Hosts
	SSH                     SSH
	Node                    Node
	Base                    Values // every parameter; a swept one holds its default
	Repeat                  int
	Timeouts                Timeouts
	Output                  Output
	Expect                  []Expectation // what each row must meet; see expect.go
	Search                  *Search       // the knee search, or nil; see search.go

	sweep sweep
	// written holds where each parameter's base value was written (nil:
	// its default), and origin the nodes that came from --set, so Expand
	// can point at a value a Check refuses.
	written map[string]*yaml.Node
	origin  map[*yaml.Node]origin
}

// Transport is the plan's transport.
func (p *Plan) Transport() string { return p.Base.Str(param.Transport) }

// Hosts are where the roles run: one server, or with topology pairs one
// per client; and one or more clients. hosts.server and hosts.client each
// take one host or a list.
type Hosts struct {
	Servers, Clients []Host
	// Pool is hosts.pool, the hosts of topology pairwise or ring; then
	// Servers and Clients are empty, and Pair gives a pair's.
	Pool []Host

	listed map[string]bool // "client": hosts.client was written as a list
}

// Server is the (first) server's host.
func (h Hosts) Server() Host { return h.Servers[0] }

// Client is the (first) client's host.
func (h Hosts) Client() Host { return h.Clients[0] }

// Several reports whether the plan has several clients or servers (or
// lists them): its points run with a start barrier and write an aggregate
// row after the clients' rows.
func (h Hosts) Several() bool {
	return len(h.Clients) > 1 || len(h.Servers) > 1 || h.listed["client"] || h.listed["server"]
}

// Role is one role's name and host.
type Role struct {
	Name string // "server" or "client" when there is one, else "server1"…, "client1"…
	Host Host
}

// Roles are every listed host's role, the servers first; a pool's hosts
// are pool1, pool2….
func (h Hosts) Roles() []Role {
	var out []Role
	name := func(kind string, i, n int) string {
		if n == 1 {
			return kind
		}
		return fmt.Sprintf("%s%d", kind, i+1)
	}
	for i, s := range h.Servers {
		out = append(out, Role{name("server", i, len(h.Servers)), s})
	}
	for i, c := range h.Clients {
		out = append(out, Role{name("client", i, len(h.Clients)), c})
	}
	for i, ph := range h.Pool {
		out = append(out, Role{fmt.Sprintf("pool%d", i+1), ph})
	}
	return out
}

// Host is where one role runs.
type Host struct {
	Address      string // "local" or an address or ssh_config alias
	Port         int    // 0 = not written (ssh_config or 22 applies)
	User         string // "" = not written
	IdentityFile string // "~" expanded; "" = not written
	Jump         string // "[user@]host[:port]"; "" = none
	DataAddress  string // "" = not written; resolved in Point.Hosts
	CPUs         string // taskset-style list "0-3,8"; "" = no pinning
	// Params are the per-host parameters (hosts.<role>.rdma.device, …),
	// the plan's values with this host's overrides laid over them.
	Params Values
}

// IsLocal reports whether the role runs on this machine, without SSH.
func (h Host) IsLocal() bool { return h.Address == localAddress }

const localAddress = "local"

// SSH settings shared by both hosts.
type SSH struct {
	KnownHosts        string        // "" = ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts; ~ expanded
	HostKeyPolicy     string        // strict | accept-new | insecure; "" = not written (docs/ssh.md#host-keys)
	ConnectTimeout    time.Duration // default 10s
	KeepaliveInterval time.Duration // 0 = ssh_config's ServerAliveInterval, else 15s
}

// Node is the deployed binary.
type Node struct {
	Binary string // local path; see Options.NodeBinary
	// RemotePath is absolute; each UIDToken in it stands for the login's
	// uid on the host (RemotePathFor). The default,
	// /var/tmp/rdmasweep-{uid}/node, gives every user a directory of
	// their own, which no other user may have made first (docs/ssh.md).
	RemotePath string
}

// UIDToken in node.remote_path is the login's uid on each host.
const UIDToken = "{uid}"

// RemotePathFor is node.remote_path on a host where the login's uid is
// uid.
func (n Node) RemotePathFor(uid int) string {
	return strings.ReplaceAll(n.RemotePath, UIDToken, strconv.Itoa(uid))
}

// RemotePathPerUID says node.remote_path depends on the login's uid.
func (n Node) RemotePathPerUID() bool { return strings.Contains(n.RemotePath, UIDToken) }

// Timeouts bound each point.
type Timeouts struct {
	Ready  time.Duration // server start to ready; default 2m; < Point
	Accept time.Duration // server waits this long for its client; default 1m
	Point  time.Duration // whole point, from server start; default 10m
}

// Output says where results go; relative paths are relative to the
// working directory.
type Output struct {
	CSV  string // default out/<name>.csv
	Logs string // default out/logs
}

// Load reads the plan at path and returns it validated, with --set
// assignments applied and defaults filled in. On bad input the error is an
// ErrorList holding every problem found, each naming path.
func Load(path string, opts Options) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ErrorList{{File: path, Msg: "cannot read plan: " + errText(err)}}
	}
	return Parse(path, data, opts)
}

// errText is err's text without the path os.ReadFile puts in front, since
// Error already names the file.
func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
