package remote_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testenv"
)

// The guard's rules, on this machine (issue 31): the file and its
// directory the user's own and not group- or other-writable, the
// directories above root's or the user's and not writable by others
// unless sticky and root's; symlinks refused. Each case either runs the
// command (which is told the sha256) or refuses it, naming why.
func TestGuardRules(t *testing.T) {
	testenv.NeedRoot(t) // chown to another user
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, top, dir, file string)
		why   string // "" runs
	}{
		{"own 0700 directory", func(t *testing.T, top, dir, file string) {}, ""},
		{"under a sticky directory of root's", func(t *testing.T, top, dir, file string) { chmod(t, top, 0o777|os.ModeSticky) }, ""},
		{"directory 0777", func(t *testing.T, top, dir, file string) { chmod(t, dir, 0o777) }, "group or others may write it"},
		{"directory another user's", func(t *testing.T, top, dir, file string) { chown(t, dir, 65534) }, "another user owns it"},
		{"file another user's", func(t *testing.T, top, dir, file string) { chown(t, file, 65534) }, "another user owns it"},
		{"file group-writable", func(t *testing.T, top, dir, file string) { chmod(t, file, 0o775) }, "group or others may write it"},
		{"above: 0777, not sticky", func(t *testing.T, top, dir, file string) { chmod(t, top, 0o777) }, "group or others may write it, and it is not a sticky directory of root's"},
		{"above: sticky, another user's", func(t *testing.T, top, dir, file string) { chmod(t, top, 0o777|os.ModeSticky); chown(t, top, 65534) }, "another user owns it, and it is above the node's directory"},
		{"file a symlink", func(t *testing.T, top, dir, file string) {
			os.Rename(file, file+".real")
			os.Symlink(file+".real", file)
		}, "it is a symbolic link"},
		{"directory a symlink", func(t *testing.T, top, dir, file string) {
			os.Rename(dir, dir+".real")
			os.Symlink(dir+".real", dir)
		}, "it is a symbolic link"},
		{"file missing", func(t *testing.T, top, dir, file string) { os.Remove(file) }, "it is missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := filepath.Join(t.TempDir(), "top")
			dir := filepath.Join(top, "dir")
			file := filepath.Join(dir, "node")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, top, 0o755)
			if err := os.WriteFile(file, []byte("#!/bin/sh\necho \"ran $RDMASWEEP_NODE_SHA256\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			c.setup(t, top, dir, file)
			argv := remote.Guard(map[string]string{file: "cafe"}, []string{file})
			out, err := remote.Local{}.Run(ctx, argv)
			err = remote.Refusal(err)
			var unsafe *remote.UnsafePathError
			switch {
			case c.why == "" && (err != nil || string(out) != "ran cafe\n"):
				t.Errorf("= %q, %v; want it run, told its sha256", out, err)
			case c.why != "" && (!errors.As(err, &unsafe) || unsafe.Why != c.why || strings.Contains(string(out), "ran")):
				t.Errorf("= %q, %v; want a refusal: %s", out, err, c.why)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGuard is what the guard adds to a start of node: a local
// start of true with and without it, side by side.
func BenchmarkGuard(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "d")
	os.Mkdir(dir, 0o700)
	exe := filepath.Join(dir, "node")
	src, err := os.ReadFile("/bin/true")
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(exe, src, 0o755)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"plain", []string{exe}},
		{"guarded", remote.Guard(map[string]string{exe: "cafe"}, []string{exe})},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if _, err := (remote.Local{}).Run(ctx, c.argv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
