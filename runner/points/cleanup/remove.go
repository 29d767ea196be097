package cleanup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

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
// which rewrites it; it is gone once nothing is left. The first error
// stops it.
func Remove(ctx context.Context, set *hostset.Set, todo []Removal, info func(msg string)) (Removed, error) {
	var done Removed
	for _, x := range todo {
		if x.What == Leftovers {
			if _, err := leftover.Open(ctx, x.Path, set.Targets(), info); err != nil {
				return done, fmt.Errorf("reap leftovers: %w", err)
			}
			if _, err := os.Stat(x.Path); err == nil {
				done.Kept = append(done.Kept, x.Path)
				continue
			}
			done.Files++
			continue
		}
		if x.What == NVMeOF {
			out, err := x.Target.Host.Run(ctx, []string{x.Node, "nvmeof-clean"})
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.HasPrefix(l, "removed ") {
					info(x.Target.Label + ": " + l)
				}
			}
			if err != nil {
				return done, fmt.Errorf("%s: %s nvmeof-clean: %w", x.Target.Label, x.Node, err)
			}
			done.Files++
			continue
		}
		if _, err := x.Target.Host.Run(ctx, []string{"rm", "-f", "--", x.Path}); err != nil {
			return done, fmt.Errorf("%s: remove %s: %w", x.Target.Label, x.Path, err)
		}
		done.Files++
	}
	return done, nil
}
