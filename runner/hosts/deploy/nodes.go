package deploy

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"rdmasweep/results"
)

// Node is one node binary of a build and the architecture it runs on.
type Node struct {
	Path   string // absolute
	Arch   string // as `uname -m` names its machines: "x86_64", "aarch64"
	GOARCH string // "amd64", "arm64"
	// Sibling says the file is a node-linux-GOARCH beside node.binary,
	// not node.binary itself.
	Sibling bool
}

// Nodes are the node binaries a build offers, at most one per
// architecture: node.binary first, then the node-linux-GOARCH files
// beside it for the other architectures.
type Nodes []Node

// SiblingName is the file name of a build's node for goarch, beside
// node.binary: make build writes bin/node-linux-amd64 and
// bin/node-linux-arm64 beside bin/node.
func SiblingName(goarch string) string { return "node-linux-" + goarch }

// siblingArches are the GOARCH values a sibling is looked for: those Go
// builds Linux binaries for and deploy knows the `uname -m` of.
var siblingArches = []string{"amd64", "arm64", "ppc64le", "riscv64", "s390x", "loong64"}

// FindNodes returns the nodes of the build whose node.binary is binary:
// binary itself, for its own architecture, and each node-linux-GOARCH
// file beside it for another. A sibling must be a Linux ELF executable
// for the architecture its name says.
func FindNodes(binary string) (Nodes, error) {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return nil, err
	}
	a, err := binaryArch(abs)
	if err != nil {
		return nil, err
	}
	ns := Nodes{{Path: abs, Arch: a.name, GOARCH: goarch(a.name)}}
	for _, ga := range siblingArches {
		p := filepath.Join(filepath.Dir(abs), SiblingName(ga))
		if p == abs {
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		sa, err := binaryArch(p)
		if err != nil {
			return nil, err
		}
		if goarch(sa.name) != ga {
			return nil, fmt.Errorf("node binary %s is built for %s, not %s as its name says: rebuild it with make build", p, sa.name, ga)
		}
		if slices.ContainsFunc(ns, func(n Node) bool { return n.Arch == sa.name }) {
			continue // node.binary serves its own architecture
		}
		ns = append(ns, Node{Path: p, Arch: sa.name, GOARCH: ga, Sibling: true})
	}
	return ns, nil
}

// NoNodeError is For's error: no node of the build runs on the host.
type NoNodeError struct {
	Arch string   // the host's `uname -m`
	Have []string // the architectures the build has nodes for
}

func (e *NoNodeError) Error() string {
	return fmt.Sprintf("the host is %s; this build has nodes for %s", e.Arch, strings.Join(e.Have, ", "))
}

// Hint says how to build a node for the host.
func (e *NoNodeError) Hint() string {
	ga := goarch(e.Arch)
	return fmt.Sprintf("build one beside node.binary, e.g. a tcp-only node: CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -tags netgo,osusergo -o bin/%s ./node (make build makes the amd64 and arm64 ones)", ga, SiblingName(ga))
}

// For returns the node for a host whose `uname -m` is uname.
func (ns Nodes) For(uname string) (Node, error) {
	uname = strings.TrimSpace(uname)
	if uname == "" {
		return Node{}, fmt.Errorf("the host did not say its architecture (uname -m printed nothing)")
	}
	for _, n := range ns {
		if a, err := binaryArch(n.Path); err == nil && a.runsOn(uname) {
			return n, nil
		}
	}
	e := &NoNodeError{Arch: uname}
	for _, n := range ns {
		e.Have = append(e.Have, n.Arch)
	}
	return Node{}, e
}

// RemotePath is where n goes on a host when node.binary goes to
// remotePath: node.binary's own architecture there, a sibling's at
// remotePath-linux-GOARCH. Each architecture has a path of its own, so
// hosts sharing a file system (an NFS home, a Slurm allocation, where
// sbcast sends to every node) never overwrite each other's node, and the
// path of a host's node depends on its architecture alone.
func (n Node) RemotePath(remotePath string) string {
	if !n.Sibling {
		return remotePath
	}
	return remotePath + "-linux-" + n.GOARCH
}

// LocalUname is this machine's architecture as `uname -m` names it: local
// roles run a node of the build in place.
func LocalUname() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}

// Transports are the transports a node binary was built with, read from
// its Go build information rather than by running it, which another
// architecture's node cannot be here. node carries tcp always and rdma
// with the rdma build tag (node/transports_rdma.go); a test holds this to
// what `node version --json` says.
func Transports(path string) ([]string, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the build information of %s: %w", path, err)
	}
	ts := []string{results.TransportTCP}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), results.TransportRDMA) {
			ts = []string{results.TransportRDMA, results.TransportTCP}
		}
	}
	return ts, nil
}
