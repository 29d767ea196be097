package testhosts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// TestHostsWithOpenSSH checks the harness with OpenSSH's own client: every
// host answers through the generated ssh_config and known_hosts, and each
// host's deploy directory is its own.
func TestHostsWithOpenSSH(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}, Bastion: true, RSAHost: true,
		CertHost: true, Dropbear: true, SSHDConfig: map[string]string{"b": "MaxSessions 1"}})
	ssh := testenv.NeedTool(t, "ssh", "openssh-client")
	for _, name := range []string{"a", "b", "rsa", "bastion", "inner", "cert", "dropbear"} {
		out, err := exec.Command(ssh, "-F", n.SSHConfig, "-o", "BatchMode=yes",
			"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+n.KnownHosts,
			name, "echo", "hello from", name).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "hello from "+name {
			t.Errorf("ssh %s: %v: %s", name, err, out)
		}
	}
	a, b := n.Hosts["a"], n.Hosts["b"]
	a.Run(t, "sh", "-c", "echo a > "+testhosts.DeployDir+"/mark")
	if got := a.Run(t, "cat", testhosts.DeployDir+"/mark"); got != "a\n" {
		t.Errorf("host a reads back %q from its deploy dir", got)
	}
	if _, err := b.Output("cat", testhosts.DeployDir+"/mark"); err == nil {
		t.Errorf("host b sees host a's file in %s: deploy dirs are shared", testhosts.DeployDir)
	}
	if pids := a.Pids(t); len(pids) == 0 {
		t.Errorf("host a lists no processes, not even sshd")
	}

	// The cert host presents a certificate OpenSSH accepts from a
	// known_hosts that holds only the CA.
	c := n.Hosts["cert"]
	caPub, _ := os.ReadFile(n.HostCAKey + ".pub")
	known := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(known, []byte("@cert-authority "+c.Addr+" "+string(caPub)), 0o600)
	out, err := exec.Command(ssh, "-F", "none", "-i", n.KeyFile, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile="+known, "-o", "GlobalKnownHostsFile=/dev/null", "root@"+c.Addr, "echo", "certified").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "certified" {
		t.Errorf("ssh to the cert host with only its CA known: %v: %s", err, out)
	}
	// The certificate-only account takes a certificate and not the key.
	key := n.SignUserCert(t, t.TempDir(), []string{n.CertUser}, "-5m:+1h")
	for _, c := range []struct {
		key  string
		want bool
	}{{key, true}, {n.KeyFile, false}} {
		out, err := exec.Command(ssh, "-F", "none", "-i", c.key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
			"-o", "UserKnownHostsFile="+n.KnownHosts, n.CertUser+"@"+a.Addr, "echo", "ok").CombinedOutput()
		if (err == nil) != c.want {
			t.Errorf("ssh as %s with %s: %v: %s; want success %v", n.CertUser, c.key, err, out, c.want)
		}
	}
	// SSHDConfig's lines come first in b's sshd_config (sshd takes a
	// keyword's first value), and b still answers (above).
	if cfg, _ := os.ReadFile(filepath.Join(n.Dir, "b", "sshd_config")); !strings.HasPrefix(string(cfg), "MaxSessions 1\n") {
		t.Errorf("b's sshd_config does not start with the extra line:\n%s", cfg)
	}
}
