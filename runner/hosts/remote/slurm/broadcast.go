package slurm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"rdmasweep/runner/hosts/remote"
)

// flight is one broadcast under way; Uploads of the same file to the same
// path wait for it rather than send it again.
type flight struct {
	sum  string
	done chan struct{}
	res  map[string]remote.UploadResult
	err  error
}

// sent is what the last broadcast to a path did on the nodes whose Host
// has not yet reported it.
type sent struct {
	sum        string
	unreported map[string]remote.UploadResult
}

// Upload puts local at the absolute path remotePath on every node of the
// allocation (see Broadcast) and reports for this Host's node: up to date
// when its copy already had the same sha256, and the bytes sent to it.
//
// The runner deploys to each host, while sbcast sends to every node at
// once: the first Host's Upload broadcasts, and the other Hosts' Uploads of
// the same file to the same path, whether at the same time or after it,
// report what that broadcast did on their node, once, instead of finding
// the file already there and calling it up to date.
func (h *Host) Upload(ctx context.Context, local, remotePath string) (remote.UploadResult, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return remote.UploadResult{}, ErrClosed
	}
	if !path.IsAbs(remotePath) {
		return remote.UploadResult{}, fmt.Errorf("remote path %q is not absolute", remotePath)
	}
	sum, size, err := hashFile(local)
	if err != nil {
		return remote.UploadResult{}, err
	}
	a := h.a
	a.mu.Lock()
	if s := a.sent[remotePath]; s != nil && s.sum == sum {
		if r, ok := s.unreported[h.node]; ok {
			delete(s.unreported, h.node)
			a.mu.Unlock()
			return r, nil
		}
	}
	a.mu.Unlock()
	res, err := a.broadcastOnce(ctx, local, remotePath, sum, size)
	if err != nil {
		return remote.UploadResult{}, err
	}
	r, ok := res[h.node]
	if !ok {
		return remote.UploadResult{}, fmt.Errorf("broadcast of %s: no result from %s", local, h.node)
	}
	a.mu.Lock()
	if s := a.sent[remotePath]; s != nil && s.sum == sum {
		delete(s.unreported, h.node)
	}
	a.mu.Unlock()
	return r, nil
}

// Broadcast puts local at the absolute path remotePath on every node of
// the allocation, atomically, mode 0755, and reports per node whether it
// was up to date and the bytes sent to it. A step on every node first
// makes the directory (0700) if it is missing, checks it is the user's
// own (see broadcast), and hashes the file there; only when a node
// differs is the file sent, by `sbcast -f` to a temporary name beside
// remotePath, which a second step makes 0755, renames into place and
// checks on every node. On failure the temporary file is removed. A concurrent call
// for the same file and path shares this one's work (and its ctx).
func (a *Allocation) Broadcast(ctx context.Context, local, remotePath string) (map[string]remote.UploadResult, error) {
	if !path.IsAbs(remotePath) {
		return nil, fmt.Errorf("remote path %q is not absolute", remotePath)
	}
	sum, size, err := hashFile(local)
	if err != nil {
		return nil, err
	}
	return a.broadcastOnce(ctx, local, remotePath, sum, size)
}

// broadcastOnce is Broadcast after hashing: it joins a broadcast of the
// same file to the same path under way, or runs one.
func (a *Allocation) broadcastOnce(ctx context.Context, local, remotePath, sum string, size int64) (map[string]remote.UploadResult, error) {
	a.mu.Lock()
	for {
		f := a.flights[remotePath]
		if f == nil {
			break
		}
		a.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.sum == sum {
			return f.res, f.err
		}
		a.mu.Lock() // another file for the same path: send ours after it
	}
	f := &flight{sum: sum, done: make(chan struct{})}
	a.flights[remotePath] = f
	a.mu.Unlock()

	f.res, f.err = a.broadcast(ctx, local, remotePath, sum, size)
	a.mu.Lock()
	delete(a.flights, remotePath)
	delete(a.sent, remotePath)
	if f.err == nil && f.res[a.nodes[0]].BytesSent > 0 {
		s := &sent{sum: sum, unreported: map[string]remote.UploadResult{}}
		for n, r := range f.res {
			s.unreported[n] = r
		}
		a.sent[remotePath] = s
	}
	a.mu.Unlock()
	close(f.done)
	return f.res, f.err
}

func hashFile(name string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// sumScript prints "rdmasweep-sum NODE" and then runs the rest: the
// guard's sha256 of the file (remote.GuardSumArgv), "-" for none that
// may be run.
const sumScript = `printf 'rdmasweep-sum %s ' "$SLURMD_NODENAME"; exec "$@"`

// placeScript makes $1 0755, renames it to $2, and runs the rest as
// sumScript does, so the file is checked as every exec will check it.
const placeScript = `chmod 0755 -- "$1" && mv -f -- "$1" "$2" || exit 1
shift 2
printf 'rdmasweep-sum %s ' "$SLURMD_NODENAME"; exec "$@"`

// sums runs argv, which prints sumScript's lines, on every node and
// returns each node's sha256.
func (a *Allocation) sums(ctx context.Context, argv []string) (map[string]string, error) {
	out, err := a.runOnAll(ctx, argv)
	if err != nil {
		return nil, err
	}
	have := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "rdmasweep-sum" {
			have[f[1]] = f[2]
		}
	}
	for _, n := range a.nodes {
		if _, ok := have[n]; !ok {
			return nil, fmt.Errorf("no answer from %s", n)
		}
	}
	return have, nil
}

// broadcast puts the file on every node whose copy differs. The
// directory must be the runner's user's own on every node, as Upload's
// is over SSH (remote.GuardSumArgv makes it 0700 when missing, and
// refuses one another user owns or could change, with an
// *remote.UnsafePathError); sbcast writes a temporary name in it, which
// only that user can, and a second step renames it into place and
// checks it again, owner, mode and sha256.
func (a *Allocation) broadcast(ctx context.Context, local, remotePath, sum string, size int64) (map[string]remote.UploadResult, error) {
	dir := path.Dir(remotePath)
	have, err := a.sums(ctx, append([]string{"sh", "-c", sumScript, "sh"}, remote.GuardSumArgv(remotePath)...))
	if err != nil {
		return nil, fmt.Errorf("check %s and hash %s on every node: %w", dir, remotePath, err)
	}
	res := map[string]remote.UploadResult{}
	stale := false
	for _, n := range a.nodes {
		res[n] = remote.UploadResult{UpToDate: have[n] == sum}
		stale = stale || have[n] != sum
	}
	if !stale {
		a.deployed.Add(remotePath, sum)
		return res, nil
	}

	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, "."+path.Base(remotePath)+".tmp-"+hex.EncodeToString(rnd[:]))
	if _, err := a.output(ctx, "sbcast", "--jobid="+a.JobID, "--force", local, tmp); err != nil {
		a.removeTemp(tmp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("sbcast %s to %s: %w", local, tmp, err)
	}
	have, err = a.sums(ctx, append([]string{"sh", "-c", placeScript, "sh", tmp, remotePath}, remote.GuardSumArgv(remotePath)...))
	if err != nil {
		a.removeTemp(tmp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("rename %s into place on every node: %w", tmp, err)
	}
	for _, n := range a.nodes {
		if have[n] != sum {
			return nil, fmt.Errorf("check %s on %s after the broadcast: its sha256 is %s, not %s", remotePath, n, have[n], sum)
		}
	}
	a.deployed.Add(remotePath, sum)
	for n, r := range res {
		r.BytesSent = size
		res[n] = r
	}
	return res, nil
}

// removeTemp removes a failed broadcast's temporary file on every node.
func (a *Allocation) removeTemp(tmp string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.runOnAll(ctx, []string{"rm", "-f", "--", tmp})
}

// runOnAll runs argv as one step with a task on every node and returns
// the tasks' stdout, without their marker lines.
func (a *Allocation) runOnAll(ctx context.Context, argv []string) ([]byte, error) {
	p, err := a.launch(ctx, stepSpec{nodes: a.nodes, argv: argv})
	if err != nil {
		return nil, err
	}
	out, err := p.collect(ctx)
	if err != nil {
		if r := remote.Refusal(err); r != err {
			return nil, r
		}
		var ee *remote.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, err
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if !strings.HasPrefix(line, stepMarker) {
			kept = append(kept, line)
		}
	}
	return []byte(strings.Join(kept, "")), nil
}
