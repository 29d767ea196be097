package remote_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testenv"

	"golang.org/x/sys/unix"
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
		{"directory group-writable", func(t *testing.T, top, dir, file string) { chmod(t, dir, 0o770) }, "group or others may write it"},
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
		{"file another build", func(t *testing.T, top, dir, file string) {
			if err := os.WriteFile(file, []byte(nodeScript+"# another build\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "it is not the node the runner deployed (its sha256 is "},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := filepath.Join(t.TempDir(), "top")
			dir := filepath.Join(top, "dir")
			file := filepath.Join(dir, "node")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, top, 0o755)
			if err := os.WriteFile(file, []byte(nodeScript), 0o755); err != nil {
				t.Fatal(err)
			}
			c.setup(t, top, dir, file)
			argv := remote.Guard(map[string]string{file: nodeScriptSum}, []string{file})
			out, err := remote.Local{}.Run(ctx, argv)
			err = remote.Refusal(err)
			var unsafe *remote.UnsafePathError
			switch {
			case c.why == "" && (err != nil || string(out) != "ran "+nodeScriptSum+"\n"):
				t.Errorf("= %q, %v; want it run, told its sha256", out, err)
			case c.why != "" && (!errors.As(err, &unsafe) || !strings.HasPrefix(unsafe.Why, c.why) || strings.Contains(string(out), "ran")):
				t.Errorf("= %q, %v; want a refusal: %s", out, err, c.why)
			}
		})
	}
}

// nodeScript stands for node in the guard's tests: it says it ran, and
// the sha256 it was told.
const nodeScript = "#!/bin/sh\necho \"ran $RDMASWEEP_NODE_SHA256\"\n"

var nodeScriptSum = func() string {
	h := sha256.Sum256([]byte(nodeScript))
	return hex.EncodeToString(h[:])
}()

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
// start of true with and without it, side by side. (node is far larger
// than true: the guard's sha256sum of it adds what hashing its size
// costs, as node's self-check does.)
func BenchmarkGuard(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "d")
	os.Mkdir(dir, 0o700)
	exe := filepath.Join(dir, "node")
	src, err := os.ReadFile("/bin/true")
	if err != nil {
		b.Fatal(err)
	}
	os.WriteFile(exe, src, 0o755)
	h := sha256.Sum256(src)
	sum := hex.EncodeToString(h[:])
	ctx := context.Background()
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"plain", []string{exe}},
		{"guarded", remote.Guard(map[string]string{exe: sum}, []string{exe})},
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

// The guard's race (issue 42): another user owns the entry a victim's
// node path goes through, in a sticky directory (made there before the
// victim's), and flips it, as fast as it can, between a directory of its
// own holding its program and a symlink to a directory of the victim's
// holding the right node. With fs.protected_symlinks=0 the victim's
// shell follows that symlink, so each test the guard makes by path may
// see the other entry. Of 300 guarded execs, none may run the attacker's
// program: the guard decides on its descriptor of the directory and
// executes through it. (A guard that execs by path ran it 41 times in
// 300.) The count is of a correctness rule, not a timing: the race is
// live for every exec, however loaded the machine.
func TestGuardRace(t *testing.T) {
	testenv.NeedRoot(t) // chown to another user, the sysctl
	const sysctl = "/proc/sys/fs/protected_symlinks"
	old, err := os.ReadFile(sysctl)
	if err != nil {
		testenv.Skip(t, "no "+sysctl+": "+err.Error())
	}
	if err := os.WriteFile(sysctl, []byte("0\n"), 0); err != nil {
		testenv.Skip(t, "cannot set fs.protected_symlinks=0 (a container?): "+err.Error())
	}
	t.Cleanup(func() {
		if err := os.WriteFile(sysctl, old, 0); err != nil {
			t.Errorf("restore %s to %q: %v", sysctl, old, err)
		}
	})
	const attacker = 65534
	root := t.TempDir()
	chmod(t, root, 0o755)
	shared := filepath.Join(root, "tmp") // as /var/tmp: root's, 1777
	mkdir(t, shared, 0o777|os.ModeSticky)
	good := filepath.Join(root, "victim") // the victim's own node
	mkdir(t, good, 0o700)
	if err := os.WriteFile(filepath.Join(good, "node"), []byte(nodeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	// The attacker's entries: its directory, at the victim's path, with
	// its program; beside it a symlink to the victim's directory.
	entry := filepath.Join(shared, "rdmasweep-0")
	evil := filepath.Join(shared, ".evil")
	mkdir(t, entry, 0o755)
	if err := os.WriteFile(filepath.Join(entry, "node"), []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	chown(t, filepath.Join(entry, "node"), attacker)
	chown(t, entry, attacker)
	if err := os.Symlink(good, evil); err != nil {
		t.Fatal(err)
	}
	chown(t, evil, attacker)

	stop := make(chan struct{})
	flipped := make(chan int)
	go func() {
		n := 0
		defer func() { flipped <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, entry, unix.AT_FDCWD, evil, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("flip: %v", err)
				return
			}
			n++
		}
	}()
	file := filepath.Join(entry, "node")
	argv := remote.Guard(map[string]string{file: nodeScriptSum}, []string{file})
	ctx := context.Background()
	const execs = 300
	var ran, refused int
	why := map[string]int{}
	for range execs {
		out, err := remote.Local{}.Run(ctx, argv)
		var unsafe *remote.UnsafePathError
		switch {
		case strings.Contains(string(out), "evil"):
			t.Errorf("the attacker's program ran: %q", out)
		case errors.As(remote.Refusal(err), &unsafe):
			refused++
			why[unsafe.Why]++
		case err == nil && string(out) == "ran "+nodeScriptSum+"\n":
			ran++
		default:
			t.Errorf("guarded exec = %q, %v; want the victim's node run, or a refusal", out, err)
		}
	}
	close(stop)
	t.Logf("%d guarded execs while the entry flipped %d times: %d ran the victim's node, %d refused %v", execs, <-flipped, ran, refused, why)
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

// The guard skips its hash while the file's signature (device, inode,
// size, ctime) is the one it printed when it hashed it at the upload:
// the unchanged file runs; the same file rewritten in place (same size,
// other bytes) or another file renamed over it, is hashed again and
// refused.
func TestGuardSignature(t *testing.T) {
	ctx := context.Background()
	other := strings.Replace(nodeScript, "ran", "RAN", 1) // same size
	for _, c := range []struct {
		name   string
		change func(t *testing.T, file string)
	}{
		{"unchanged", func(t *testing.T, file string) {}},
		{"rewritten in place", func(t *testing.T, file string) {
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte(other), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed over", func(t *testing.T, file string) {
			if err := os.WriteFile(file+".new", []byte(other), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(file+".new", file); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			file := filepath.Join(dir, "node")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(nodeScript), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := remote.Local{}.Run(ctx, remote.GuardSumArgv(file))
			f := strings.Fields(string(out))
			if err != nil || len(f) != 2 || f[0] != nodeScriptSum {
				t.Fatalf("the guard's sum = %q, %v; want the sha256 and a signature", out, err)
			}
			var d remote.Deployed
			d.AddChecked(file, f[0], f[1])
			// ctime moves by the kernel's clock tick: a change must come
			// after one, or it leaves the ctime the stat saw.
			time.Sleep(50 * time.Millisecond)
			c.change(t, file)
			out, err = remote.Local{}.Run(ctx, d.Guard([]string{file}))
			var unsafe *remote.UnsafePathError
			switch {
			case c.name == "unchanged" && (err != nil || string(out) != "ran "+nodeScriptSum+"\n"):
				t.Errorf("= %q, %v; want it run", out, err)
			case c.name != "unchanged" && (!errors.As(remote.Refusal(err), &unsafe) || !strings.HasPrefix(unsafe.Why, "it is not the node the runner deployed")):
				t.Errorf("= %q, %v; want it hashed and refused", out, err)
			}
		})
	}
}
