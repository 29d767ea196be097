package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// Faults that test what must never leak or be trusted: the secret and the listen address, a changed host key. See faults_test.go for the table every fault joins and the
// harness it runs in.

// secretAndListen is exposure, not a fault: no secret in argv, the
// environment, the CSV or the logs; node serve listens on the data
// address only.
func secretAndListen() fault {
	return fault{
		name: "secret_and_listen", sweep: onePoint, args: short("2s"), code: 0, wait: 60 * time.Second,
		inject: func(f *faultRun) {
			f.pids = f.r.WaitNodes(f, f.a, f.b)
			for h, pid := range f.pids {
				argv := procStrings(f.T, pid, "cmdline")
				if !slices.Contains(argv, "--control-stdin") {
					f.Errorf("%s: node not given its control on stdin: %q", h.Name, argv)
				}
				for _, s := range append(argv, procStrings(f.T, pid, "environ")...) {
					if strings.HasPrefix(s, results.NodeSHA256Env+"=") {
						continue // the deployed node's sha256, public (docs/ssh.md#deploy-path)
					}
					if hex64.MatchString(s) || strings.Contains(strings.ToLower(s), "secret") {
						f.Errorf("%s: node pid %d shows %q to ps", h.Name, pid, s)
					}
				}
			}
			ss := f.a.Run(f, "ss", "-Hltnp")
			var listening []string
			for _, line := range strings.Split(ss, "\n") {
				if strings.Contains(line, fmt.Sprintf("pid=%d,", f.pids[f.a])) {
					listening = append(listening, strings.Fields(line)[3])
				}
			}
			if want := fmt.Sprintf("%s:%d", f.a.Addr, faultPort); len(listening) != 1 || listening[0] != want {
				f.Errorf("node serve listens on %v, want only %s\n%s", listening, want, ss)
			}
		},
		check: func(f *faultRun) {
			files := []string{f.csv}
			logs, _ := filepath.Glob(filepath.Join(f.dir, "out/logs/*/*"))
			if len(logs) != 2 {
				f.Fatalf("want a log per role, got %v", logs)
			}
			for _, file := range append(files, logs...) {
				data, err := os.ReadFile(file)
				if err != nil {
					f.Fatal(err)
				}
				if m := hex64.Find(data); m != nil {
					f.Errorf("%s holds a secret-like token %s", file, m)
				}
			}
			if m := hex64.FindString(f.r.Stdout() + f.r.Stderr()); m != "" {
				f.Errorf("the runner printed a secret-like token %s", m)
			}
		},
	}
}

// changedHostKey: a changed host key is refused under strict and
// accept-new, before anything runs, naming the known_hosts line.
func changedHostKey(policy string) fault {
	var (
		known  string
		line   int
		before []byte
	)
	return fault{
		name: "changed_host_key_" + policy, sweep: onePoint, code: 1, wait: 3 * time.Minute,
		setup: func(f *faultRun) []string {
			known, line = knownHostsWithChangedKey(f.T, f.n, f.a)
			before, _ = os.ReadFile(known)
			return []string{"--set", "ssh.known_hosts=" + known, "--set", "ssh.host_key_policy=" + policy}
		},
		check: func(f *faultRun) {
			stderr := f.r.Stderr()
			if !strings.Contains(stderr, fmt.Sprintf("known_hosts %s:%d", known, line)) || !strings.Contains(stderr, "CHANGED") {
				f.Fatalf("stderr:\n%s", stderr)
			}
			if after, _ := os.ReadFile(known); !bytes.Equal(after, before) {
				f.Fatalf("known_hosts was changed:\n%s", after)
			}
			if rows, err := csvfile.Read(f.csv); err == nil && len(rows) > 0 {
				f.Fatalf("rows written: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes ran: %v", left)
			}
		},
	}
}

// knownHostsWithChangedKey copies the hosts' known_hosts with h's key
// replaced by a fresh one, as after a reinstall (or an attack), and returns
// the file and h's line.
func knownHostsWithChangedKey(t *testing.T, n *testhosts.Net, h *testhosts.Host) (string, int) {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(n.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	at := 0
	for i, l := range lines {
		if strings.HasPrefix(l, h.Addr+" ") {
			lines[i] = h.Addr + " " + strings.TrimSpace(string(pub))
			at = i + 1
		}
	}
	if at == 0 {
		t.Fatalf("%s not in %s", h.Addr, n.KnownHosts)
	}
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return known, at
}
