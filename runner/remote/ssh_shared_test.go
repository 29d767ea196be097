package remote_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/runner/remote"
	"rdmasweep/testbed/testhosts"
)

// Two users on one host uploading node to one path in a sticky, world-
// writable directory (issue 19): neither may rename over the other's
// file, so the first upload wins, the loser takes the winner's file when
// it is the same, and refuses, naming the owner, when it is not.
func testSharedStickyDir(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	cfgOf := func(user string) remote.SSHConfig {
		cfg := config(t, n, a)
		cfg.User = user
		return cfg
	}
	alice, dashu := dial(t, cfgOf(n.User)), dial(t, cfgOf(testhosts.PeerUser))
	if alice.Machine() != dashu.Machine() || alice.Machine() == "" {
		t.Fatalf("Machine of two users on one host: %q and %q, want one", alice.Machine(), dashu.Machine())
	}
	local, sum := randomFile(t, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Ten first runs, each on a fresh sticky directory, both users at once.
	lost := 0
	for i := range 10 {
		dir := fmt.Sprintf("%s/shared-%d", testhosts.DeployDir, i)
		a.Run(t, "install", "-d", "-m", "1777", dir)
		target := dir + "/node"
		var res [2]remote.UploadResult
		var errs [2]error
		var wg sync.WaitGroup
		for j, h := range []*remote.SSH{alice, dashu} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[j], errs[j] = h.Upload(ctx, local, target)
			}()
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("run %d: upload as user %d of 2: %v", i+1, j+1, err)
			}
			if res[j].UpToDate && res[j].BytesSent > 0 {
				lost++
			}
		}
		if got := a.Run(t, "sha256sum", target); !strings.HasPrefix(got, sum) {
			t.Fatalf("run %d: %s holds %s, want the uploaded file", i+1, target, got)
		}
		if left := a.Run(t, "find", dir, "-name", ".*tmp*"); left != "" {
			t.Errorf("run %d: temporary files left: %s", i+1, left)
		}
	}
	// How often the second upload reached the rename and lost: timing
	// decides, so it is reported, not asserted.
	t.Logf("10 first runs: %d uploads lost the rename and took the other user's file", lost)

	// Another node already there, owned by the other user: refused, and
	// the file in place is left alone.
	dir := testhosts.DeployDir + "/shared-differs"
	a.Run(t, "install", "-d", "-m", "1777", dir)
	target := dir + "/node"
	other, _ := randomFile(t, 4096)
	if _, err := dashu.Upload(ctx, other, target); err != nil {
		t.Fatal(err)
	}
	before := a.Run(t, "sha256sum", target)
	_, err := alice.Upload(ctx, local, target)
	var foreign *remote.ForeignFileError
	if !errors.As(err, &foreign) || foreign.Owner != testhosts.PeerUser || foreign.Path != target {
		t.Fatalf("upload over another user's different file = %v; want a ForeignFileError naming %s", err, testhosts.PeerUser)
	}
	for _, want := range []string{target, "belongs to " + testhosts.PeerUser, "not this node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !strings.Contains(foreign.Hint(), "node.remote_path") || !strings.Contains(foreign.Hint(), "remove "+target) {
		t.Errorf("hint %q does not say what to do", foreign.Hint())
	}
	if after := a.Run(t, "sha256sum", target); after != before {
		t.Errorf("the other user's file changed: %s, was %s", after, before)
	}
	if left := a.Run(t, "find", dir, "-name", ".*tmp*"); left != "" {
		t.Errorf("temporary files left: %s", left)
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
