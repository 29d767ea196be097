package deploy

import (
	"context"
	"sync"

	"rdmasweep/runner/hosts/remote"
)

// Roles on one machine may be two Hosts with one filesystem (two
// connections of one user, written with different keys or CPU lists):
// when their node.remote_path is the same, both deploys write one file.
// Deploy takes them in turn: the first uploads, and the next finds the
// file up to date (its own sha256sum, as its own user). Two users have
// two paths (the default is per user, /var/tmp/rdmasweep-{uid}/node), and
// one user's directory is refused to the other (remote.UnsafePathError),
// so they never share a file. Hosts on different machines, or paths that
// differ, still deploy at once.

// machiner is a Host that names the machine it reaches whoever logs in
// (remote.SSH does); any other Host is its own machine, by Name.
type machiner interface{ Machine() string }

// fileKey names the file a deploy writes: the machine and the path. The
// machine is the resolved address a connection reaches, not
// /etc/machine-id: cloned images and containers share a machine id while
// their filesystems differ, and a key that is wrongly shared only costs
// waiting, while one wrongly apart races.
func fileKey(h remote.Host, remotePath string) string {
	m := h.Name()
	if mh, ok := h.(machiner); ok && mh.Machine() != "" {
		m = mh.Machine()
	}
	return m + "\x00" + remotePath
}

// fileTurns holds one token per file being deployed by this process.
var fileTurns = struct {
	mu sync.Mutex
	m  map[string]*turn
}{m: map[string]*turn{}}

type turn struct {
	token chan struct{} // holds one token: taking it is the turn
	users int           // deploys holding or awaiting it
}

// awaitTurn blocks until no other Deploy of this process writes key, or
// ctx ends; release ends the turn.
func awaitTurn(ctx context.Context, key string) (release func(), err error) {
	fileTurns.mu.Lock()
	t := fileTurns.m[key]
	if t == nil {
		t = &turn{token: make(chan struct{}, 1)}
		t.token <- struct{}{}
		fileTurns.m[key] = t
	}
	t.users++
	fileTurns.mu.Unlock()
	leave := func() {
		fileTurns.mu.Lock()
		if t.users--; t.users == 0 {
			delete(fileTurns.m, key)
		}
		fileTurns.mu.Unlock()
	}
	select {
	case <-t.token:
		return func() { t.token <- struct{}{}; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
