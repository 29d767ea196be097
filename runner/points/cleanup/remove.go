package cleanup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/deploy"

	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/files/leftover"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// LockCSV takes the lock of the CSV at path, when it exists, so no exec
// starts on it while clean reaps: an exec appending to it owns its nodes
// and its state, and reaping them would kill a live run. An exec holding
// the lock refuses the clean. A CSV that is not today's is locked all the
// same, and nil is a CSV that does not exist. The caller closes it once
// the clean is done.
func LockCSV(path string) (*csvfile.File, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	csv, err := csvfile.Open(path)
	switch {
	case errors.Is(err, csvfile.ErrLocked):
		return nil, hint.Wrap(fmt.Errorf("%s: %w", path, err), "wait for the exec to finish, then clean")
	case err != nil && !errors.Is(err, csvfile.ErrForeignHeader) && !errors.Is(err, csvfile.ErrOlderHeader):
		return nil, fmt.Errorf("open %s: %w", path, err)
	case err != nil:
		return nil, nil
	}
	return csv, nil
}

// StatePath is the leftover record an exec keeps beside the CSV at csvPath.
func StatePath(csvPath string) string { return csvPath + ".state" }

// State is the removal of the leftover record beside the CSV at csvPath,
// when there is one.
func State(csvPath string) (Removal, bool) {
	path := StatePath(csvPath)
	st, err := os.Stat(path)
	if err != nil {
		return Removal{}, false
	}
	return Removal{Target: role.Target{Host: remote.Local{}, Label: "local"}, Path: path, Size: st.Size(), What: Leftovers}, true
}

// Removed is what Remove did.
type Removed struct {
	Files int
	// Kept are the leftover records that still list nodes on hosts set
	// does not reach, and so were kept.
	Kept []string
}

// Remove removes todo in order, on the hosts of set. A leftover record
// is removed by reaping the nodes it records (info says what it reaps),
// which rewrites it; it is gone once nothing is left. NVMe-oF records are
// removed by the build's node, deployed first through the guarded upload
// and run through the guard; node itself by the guard's rm; a data file
// or sidecar by one command that checks it again, through a descriptor
// of its directory, and removes it there. A file found changed is kept,
// and info says so. The first error stops it.
func Remove(ctx context.Context, set *hostset.Set, todo []Removal, info func(msg string)) (Removed, error) {
	var done Removed
	for _, x := range todo {
		switch x.What {
		case Leftovers:
			if _, err := leftover.Open(ctx, x.Path, set.Targets(), info); err != nil {
				return done, fmt.Errorf("reap leftovers: %w", err)
			}
			if _, err := os.Stat(x.Path); err == nil {
				done.Kept = append(done.Kept, x.Path)
				continue
			}
		case NVMeOF:
			if err := nvmeofClean(ctx, x, info); err != nil {
				return done, err
			}
		case NodeBinary:
			if _, err := x.Target.Host.Run(ctx, remote.GuardRemoveArgv(x.Path)); err != nil {
				return done, fmt.Errorf("%s: remove %s: %w", x.Target.Label, x.Path, remote.Refusal(err))
			}
		default:
			out, err := x.Target.Host.Run(ctx, []string{"/bin/sh", "-c", removeScript, "sh", x.Path, x.What.sidecarOf(x.Path)})
			if err != nil {
				return done, fmt.Errorf("%s: remove %s: %w", x.Target.Label, x.Path, err)
			}
			if why, kept := strings.CutPrefix(strings.TrimSpace(string(out)), "kept\t"); kept {
				info(fmt.Sprintf("%s: keeping %s: %s", x.Target.Label, x.Path, why))
				continue
			}
		}
		done.Files++
	}
	return done, nil
}

// sidecarOf is the sidecar that must vouch for path before it goes: its
// own for a data file, none ("") for anything else.
func (w Kind) sidecarOf(path string) string {
	if w == DataFile {
		return path + results.SidecarSuffix
	}
	return ""
}

// removeScript removes $1 when it, and $2 unless "", are regular files
// (no links) of the login user's, checked and removed through one open
// of $1's directory (fd 4), so no rename of a directory on the path
// between the check and the removal points it elsewhere; otherwise it
// prints "kept", a tab and why.
const removeScript = `f=$1 sc=$2
case $f in */*) d=${f%/*}; [ -n "$d" ] || d=/ ;; *) d=. ;; esac
[ -e "$d" ] || exit 0
{ command exec 4<"$d"; } 2>/dev/null || { printf 'kept\t%s\n' "its directory cannot be opened"; exit 0; }
p=/proc/self/fd/4
for g in "${f##*/}" ${sc:+"${sc##*/}"}; do
  if [ ! -e "$p/$g" ] && [ ! -h "$p/$g" ]; then
    [ "$g" = "${f##*/}" ] && exit 0
    printf 'kept\t%s\n' "its sidecar is gone"; exit 0
  fi
  if [ -h "$p/$g" ] || [ ! -f "$p/$g" ] || [ ! -O "$p/$g" ]; then
    printf 'kept\t%s\n' "$g is no longer a regular file of yours"; exit 0
  fi
done
exec rm -f -- "$p/${f##*/}"`

// nvmeofClean deploys the build's node for x's host through the guarded
// upload, then runs its nvmeof-clean through the guard, told the
// node's sha256, so that what runs is the build's node or nothing.
func nvmeofClean(ctx context.Context, x Removal, info func(string)) error {
	sum, err := fileSHA256(x.Binary)
	if err != nil {
		return err
	}
	res, err := deploy.Deploy(ctx, x.Target.Host, x.Binary, x.Node, x.Arch)
	if err != nil {
		return fmt.Errorf("%s: deploy node to %s to remove NVMe-oF records: %w", x.Target.Label, x.Node, err)
	}
	if !res.UpToDate {
		info(fmt.Sprintf("%s: deployed node to %s to remove NVMe-oF records", x.Target.Label, x.Node))
	}
	out, err := x.Target.Host.Run(ctx, remote.GuardExecArgv(x.Node, sum, []string{x.Node, "nvmeof-clean"}))
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "removed ") {
			info(x.Target.Label + ": " + l)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %s nvmeof-clean: %w", x.Target.Label, x.Node, remote.Refusal(err))
	}
	return nil
}

// fileSHA256 is the hex sha256 of the local file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
