package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// keyPlan is a plan with its server on host a and its client on b that
// names known_hosts but no host key policy, so the flag, ssh_config or
// the default decide.
func keyPlan(t *testing.T, dir string, n *testhosts.Net, knownHosts string) string {
	a, b := n.Hosts["a"], n.Hosts["b"]
	text := fmt.Sprintf(`name: host-keys
hosts:
  server: {address: %s, user: root, identity_file: %s}
  client: {address: %s, user: root, identity_file: %s}
ssh: {known_hosts: %s, connect_timeout: 5s}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/data.dat, file_size: 8MiB, create: true}
client: {queue_depth: 4}
sweep:
  zip:
    block_size: [64KiB]
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/keys.csv, logs: out/logs}
`, a.Addr, n.KeyFile, b.Addr, n.KeyFile, knownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir)
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// fingerprint is a host's ed25519 key as ssh-keygen -l prints it.
func fingerprint(t *testing.T, h *testhosts.Host) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-l", "-f", h.HostKeyFiles[0]).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
		t.Fatalf("ssh-keygen -l -f %s: %q, %v", h.HostKeyFiles[0], out, err)
	}
	return f[1]
}

// keyOf is the base64 of a host's ed25519 key.
func keyOf(t *testing.T, h *testhosts.Host) string {
	t.Helper()
	pub, err := os.ReadFile(h.HostKeyFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(pub))[1]
}

// TestUnknownHostKeys: runner check against real sshd hosts whose keys
// known_hosts lacks (issue 31). With no policy in the plan, no flag and no
// StrictHostKeyChecking, the first contact is refused as OpenSSH refuses
// it in batch mode, naming the host, its fingerprint and what accepts new
// keys, and nothing is written. --accept-new-host-keys accepts and writes
// both keys, after which check passes without it; ssh_config's
// StrictHostKeyChecking accept-new accepts too. A changed key is refused
// with the flag or without it.
func TestUnknownHostKeys(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	a, b := n.Hosts["a"], n.Hosts["b"]
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, nil, 0o600)
	plan := keyPlan(t, dir, n, known)

	r := runnerEnv(t, dir, env, "check", plan)
	if r.Code != 1 {
		t.Fatalf("check of unknown hosts: exit %d, want 1\n%s", r.Code, r.Stderr)
	}
	for _, want := range []string{"unknown host " + a.Addr + ":22", fingerprint(t, a), "--accept-new-host-keys", "ssh.host_key_policy: accept-new"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.Stderr)
		}
	}
	t.Logf("the refusal:\n%s", r.Stderr)
	if b, _ := os.ReadFile(known); len(b) != 0 {
		t.Fatalf("a refused host was written to known_hosts: %q", b)
	}

	r = runnerEnv(t, dir, env, "check", plan, "--accept-new-host-keys")
	if r.Code != 0 {
		t.Fatalf("check --accept-new-host-keys: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, h := range []*testhosts.Host{a, b} {
		// Written as ssh would find it (hashed, if ssh_config says so).
		if out, err := exec.Command("ssh-keygen", "-F", h.Addr, "-f", known).CombinedOutput(); err != nil || !strings.Contains(string(out), keyOf(t, h)) {
			t.Errorf("ssh-keygen -F %s in known_hosts: %v: %s; want its key", h.Addr, err, out)
		}
		if want := "added host key for " + h.Addr + " (ssh-ed25519 " + fingerprint(t, h) + ")"; !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	if r = runnerEnv(t, dir, env, "check", plan); r.Code != 0 {
		t.Fatalf("check once the keys are known: exit %d\n%s", r.Code, r.Stderr)
	}

	// ssh_config's StrictHostKeyChecking accept-new, a fresh known_hosts.
	home := strings.TrimPrefix(env[len(env)-2], "HOME=")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host *\n  StrictHostKeyChecking accept-new\n"), 0o600)
	os.WriteFile(known, nil, 0o600)
	if r = runnerEnv(t, dir, env, "check", plan); r.Code != 0 || !strings.Contains(r.Stderr, "added host key for "+a.Addr) {
		t.Fatalf("check under StrictHostKeyChecking accept-new: exit %d\n%s", r.Code, r.Stderr)
	}
	os.Remove(filepath.Join(home, ".ssh", "config"))

	// A changed key: refused with or without the flag, known_hosts kept.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewPublicKey(pub)
	content := a.Addr + " " + string(ssh.MarshalAuthorizedKey(other)) + b.Addr + " ssh-ed25519 " + keyOf(t, b) + "\n"
	os.WriteFile(known, []byte(content), 0o600)
	for _, flags := range [][]string{nil, {"--accept-new-host-keys"}} {
		r = runnerEnv(t, dir, env, append([]string{"check", plan}, flags...)...)
		if r.Code != 1 || !strings.Contains(r.Stderr, "host key for "+a.Addr+" has CHANGED") {
			t.Errorf("check %v with a changed key: exit %d, want 1 and CHANGED\n%s", flags, r.Code, r.Stderr)
		}
	}
	if b, _ := os.ReadFile(known); string(b) != content {
		t.Errorf("known_hosts changed after a changed key:\n%s", b)
	}
}
