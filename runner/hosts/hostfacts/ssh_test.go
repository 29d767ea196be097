package hostfacts

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testhosts"
)

// TestNoShellOnSSHHosts collects facts from real OpenSSH hosts as users
// whose shells work, print noise, or cannot run a command, and as root
// after /bin/sh is broken on the host.
func TestNoShellOnSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a"}})
	a := n.Hosts["a"]
	t.Setenv("SSH_AUTH_SOCK", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(t *testing.T, user string) remote.Host {
		t.Helper()
		h, err := remote.DialSSH(ctx, remote.SSHConfig{
			Address: a.Addr, User: user, IdentityFile: n.KeyFile,
			KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
			ConfigFile: filepath.Join(t.TempDir(), "none"), ConnectTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	const shape = "cannot collect facts: no working /bin/sh on the host (exit %s) — the node needs a POSIX shell to be started"

	for _, tc := range []struct {
		user string
		uid  int
	}{{n.User, testhosts.UserUID}, {n.NoisyUser, testhosts.NoisyUID}} {
		t.Run("works_as_"+tc.user, func(t *testing.T) {
			f, err := Collect(ctx, dial(t, tc.user), Query{File: testhosts.DeployDir + "/x.dat"})
			if err != nil || f.Arch == "" || f.Kernel == "" || f.File == nil || !f.File.DirWritable || f.File.FSType != "tmpfs" {
				t.Fatalf("facts %+v file %+v, %v", f, f.File, err)
			}
			if f.UID != tc.uid {
				t.Errorf("uid %d, want %d", f.UID, tc.uid)
			}
		})
	}

	t.Run("login_shell_missing", func(t *testing.T) {
		_, err := Collect(ctx, dial(t, n.NoShellUser), Query{})
		var nosh *NoShellError
		if !errors.Is(err, ErrNoShell) || !errors.As(err, &nosh) || err.Error() != strings.Replace(shape, "%s", "127", 1) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(nosh.Hint(), testhosts.MissingShell+": not found") {
			t.Errorf("hint %q does not quote the host", nosh.Hint())
		}
	})

	t.Run("bin_sh_broken", func(t *testing.T) {
		h := dial(t, "root") // root's login shell is bash, which still runs
		a.BreakSh(t)
		if out, err := h.Run(ctx, []string{"uname", "-m"}); err != nil || len(out) == 0 {
			t.Fatalf("the login shell should still run commands: %q, %v", out, err)
		}
		_, err := Collect(ctx, h, Query{})
		var nosh *NoShellError
		if !errors.Is(err, ErrNoShell) || !errors.As(err, &nosh) || err.Error() != strings.Replace(shape, "%s", "126", 1) {
			t.Fatalf("err = %v", err)
		}
	})
}
