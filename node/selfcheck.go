package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"rdmasweep/results"
)

// selfExe is node's own executable: the file this process runs, even if
// its path has since been renamed over.
const selfExe = "/proc/self/exe"

// selfCheck runs before any command when the runner's guard set
// results.NodeSHA256Env. The guard has already checked, before the exec,
// the file it executes, through its descriptor of the file's directory:
// the file and its directory are the login user's, group and others may
// not write them, and the file's sha256 is the one the runner uploaded
// (runner/hosts/remote/deploypath.go). So no other user's program gets
// this far, and no byte of one runs: a check here, after the exec, comes
// too late for that. This one is the second of two: it holds even where
// a command ran node without the guard, by path or by another launcher,
// as long as the variable was set, and catches the same user's
// replacement of the file (another build renamed over it). It checks the
// running file itself (/proc/self/exe): its sha256 is the expected one,
// it and its directory belong to this uid and are not writable by group
// or others. It then unsets the variable, so an agent's children,
// exec'd from the same file, do not hash again.
func selfCheck() error {
	want := os.Getenv(results.NodeSHA256Env)
	if want == "" {
		return nil
	}
	os.Unsetenv(results.NodeSHA256Env)
	path, err := os.Readlink(selfExe)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	return checkExe(selfExe, strings.TrimSuffix(path, " (deleted)"), want)
}

// checkExe opens exe, the executable as the process runs it, whose path
// is path, and refuses it unless it and path's directory are this uid's
// and not writable by group or others, and its sha256 is want.
func checkExe(exe, path, want string) error {
	f, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("self-check: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	if err := ownedSafe(path, fi); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	di, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("self-check: %w", err)
	}
	if !di.IsDir() {
		return fmt.Errorf("self-check: %s is not a directory (%v)", dir, di.Mode())
	}
	if err := ownedSafe(dir, di); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("self-check: hash %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("self-check: %s is not the node the runner deployed (its sha256 is %s, the runner's %s): it was replaced since; run the runner again to deploy its node", path, got, want)
	}
	return nil
}

// ownedSafe refuses a file or directory that is not this uid's, or that
// group or others may write.
func ownedSafe(path string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("self-check: no owner for %s", path)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("self-check: %s belongs to uid %d, not to this user (uid %d), mode %v", path, st.Uid, uid, fi.Mode())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("self-check: group or others may write %s (mode %v)", path, fi.Mode())
	}
	return nil
}
