package testhosts_test

import (
	"os/exec"
	"strings"
	"testing"

	"rdmasweep/internal/testenv"
	"rdmasweep/runner/remote/testhosts"
)

// TestHostsWithOpenSSH checks the harness with OpenSSH's own client: every
// host answers through the generated ssh_config and known_hosts, and each
// host's deploy directory is its own.
func TestHostsWithOpenSSH(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}, Bastion: true, RSAHost: true})
	ssh := testenv.NeedTool(t, "ssh", "openssh-client")
	for _, name := range []string{"a", "b", "rsa", "bastion", "inner"} {
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
}
