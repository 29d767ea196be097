package remote_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testhosts"
)

// A hostile local user on the host (issue 31): another user, PeerUser,
// makes the deploy directory first, once 0755 holding a copy of the
// victim's very node, once 0777, and once the victim's own per-user
// path. Each upload is refused, naming the directory, its owner and its
// mode, with a hint, and nothing is written there. Two users deploying
// at once each to their own directory under a shared sticky one both
// succeed.
func testHostileDeployDir(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	cfgOf := func(user string) remote.SSHConfig {
		cfg := config(t, n, a)
		cfg.User = user
		return cfg
	}
	victim, attacker := dial(t, cfgOf(n.User)), dial(t, cfgOf(testhosts.PeerUser))
	local, sum := randomFile(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	as := func(t *testing.T, h *remote.SSH, script string, args ...string) {
		t.Helper()
		if out, err := h.Run(ctx, append([]string{"sh", "-c", script, "sh"}, args...)); err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
	}
	// A copy of the victim's node the attacker has (the same build).
	own := testhosts.DeployDir + "/attacker-own/node"
	if _, err := attacker.Upload(ctx, local, own); err != nil {
		t.Fatal(err)
	}

	uid := strings.TrimSpace(a.Run(t, "id", "-u", n.User))
	for _, c := range []struct{ name, dir, mode string }{
		{"0755 with a copy", testhosts.DeployDir + "/hostile-755", "drwxr-xr-x"},
		{"0777", testhosts.DeployDir + "/hostile-777", "drwxrwxrwx"},
		{"the victim's per-user path", testhosts.VarTmp + "/rdmasweep-" + uid, "drwxr-xr-x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := "755"
			if c.mode == "drwxrwxrwx" {
				m = "777"
			}
			as(t, attacker, `mkdir -m "$1" "$2" && chmod "$1" "$2" && cp "$3" "$2/node" && chmod 755 "$2/node"`, m, c.dir, own)
			target := c.dir + "/node"
			before := a.Run(t, "sha256sum", target)
			_, err := victim.Upload(ctx, local, target)
			var unsafe *remote.UnsafePathError
			if !errors.As(err, &unsafe) || unsafe.Path != c.dir || unsafe.Owner != testhosts.PeerUser || unsafe.Mode != c.mode {
				t.Fatalf("upload into %s's %s directory = %v; want an UnsafePathError naming %s, %s and %s", testhosts.PeerUser, c.mode, err, c.dir, testhosts.PeerUser, c.mode)
			}
			for _, want := range []string{c.dir, testhosts.PeerUser, c.mode, "another user owns it"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if h := hint.Of(err); !strings.Contains(h, "node.remote_path") {
				t.Errorf("hint %q does not say what to do", h)
			}
			if after := a.Run(t, "sha256sum", target); after != before {
				t.Errorf("the attacker's file changed: %s, was %s", after, before)
			}
			if left := a.Run(t, "find", c.dir, "-name", ".*tmp*"); left != "" {
				t.Errorf("temporary files left: %s", left)
			}
		})
	}

	// Two users at once, each to a directory of their own in one sticky
	// directory: both deploy, neither waits for the other.
	for i := range 5 {
		var errs [2]error
		var wg sync.WaitGroup
		for j, h := range []*remote.SSH{victim, attacker} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = h.Upload(ctx, local, fmt.Sprintf("%s/two-%d-%d/node", testhosts.DeployDir, i, j))
			}()
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("run %d: upload as user %d of 2: %v", i+1, j+1, err)
			}
		}
	}
	if got := a.Run(t, "stat", "-c", "%U %a", testhosts.DeployDir+"/two-0-1"); got != testhosts.PeerUser+" 700\n" {
		t.Errorf("a new deploy directory is %q, want %s's, 700", got, testhosts.PeerUser)
	}
	if got := a.Run(t, "sha256sum", fmt.Sprintf("%s/two-0-0/node", testhosts.DeployDir)); !strings.HasPrefix(got, sum) {
		t.Errorf("deployed: %s, want %s", got, sum)
	}
}

// Every Start or Run that names a file the Host uploaded checks it
// first: the file as uploaded runs, with its sha256 in
// RDMASWEEP_NODE_SHA256; once group may write it, or another user owns
// it, it never runs, and the refusal says why.
func testGuardedExec(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	cfg := config(t, n, a)
	cfg.User = n.User
	s := dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := testhosts.DeployDir + "/guarded"
	marker := testhosts.DeployDir + "/guarded-ran"
	script := filepath.Join(t.TempDir(), "node")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\necho \"sum=$RDMASWEEP_NODE_SHA256\"\n"), 0o755)
	b, _ := os.ReadFile(script)
	h := sha256.Sum256(b)
	sum := hex.EncodeToString(h[:])
	target := dir + "/node"
	if _, err := s.Upload(ctx, script, target); err != nil {
		t.Fatal(err)
	}
	start := func() (string, error) {
		p, err := s.Start(ctx, []string{target, "serve"})
		if err != nil {
			return "", err
		}
		errb := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(p.Stderr()); errb <- b }()
		out, _ := io.ReadAll(p.Stdout())
		err = p.Wait()
		if r := remote.ParseRefusal(<-errb); r != nil {
			err = r
		}
		return string(out), err
	}
	if out, err := start(); err != nil || out != "sum="+sum+"\n" {
		t.Fatalf("start the uploaded file = %q, %v; want it run, told its sha256", out, err)
	}
	a.Run(t, "rm", "-f", marker)
	for _, c := range []struct{ change, why string }{
		{"chmod g+w " + target, "group or others may write it"},
		{"chmod 755 " + target + " && chown " + testhosts.PeerUser + " " + target, "another user owns it"},
		{"chown " + n.User + " " + target + " && chmod 777 " + dir, "group or others may write it"},
	} {
		a.Run(t, "sh", "-c", c.change)
		_, err := start()
		var unsafe *remote.UnsafePathError
		if !errors.As(err, &unsafe) || unsafe.Why != c.why {
			t.Errorf("after %s: start = %v; want a refusal: %s", c.change, err, c.why)
		}
		if _, err := s.Run(ctx, []string{"/bin/sh", "-c", `"$1" version`, "sh", target}); !errors.As(err, &unsafe) {
			t.Errorf("after %s: Run naming the file = %v; want an UnsafePathError", c.change, err)
		}
		if _, err := a.Output("test", "-e", marker); err == nil {
			t.Fatalf("after %s: the file ran", c.change)
		}
	}
}

// randomFile writes size random bytes and returns the file and its sha256.
func randomFile(t *testing.T, size int) (path, sum string) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	path = filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return path, hex.EncodeToString(h[:])
}
