package deploy_test

import (
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testhosts"
)

// elfHeader is the smallest file debug/elf accepts: a 64-bit
// little-endian ELF header for machine m, no sections or segments.
func elfHeader(m elf.Machine) []byte {
	b := make([]byte, 64)
	copy(b, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(m))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(b[52:], 64) // header size
	le.PutUint16(b[54:], 56) // program header entry size
	le.PutUint16(b[58:], 64) // section header entry size
	return b
}

func TestDeploy(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a"}})
	a := n.Hosts["a"]
	t.Setenv("SSH_AUTH_SOCK", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := remote.DialSSH(ctx, remote.SSHConfig{
		Address: a.Addr, User: "root", IdentityFile: n.KeyFile,
		KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
		ConfigFile: filepath.Join(t.TempDir(), "none"), ConnectTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	target := testhosts.DeployDir + "/deploy/node"
	arch := strings.TrimSpace(a.Run(t, "uname", "-m"))

	// A binary for another architecture than the host's is refused, and
	// nothing is uploaded.
	other, otherName := elf.EM_AARCH64, "aarch64"
	if arch == "aarch64" {
		other, otherName = elf.EM_X86_64, "x86_64"
	}
	foreign := filepath.Join(t.TempDir(), "node")
	os.WriteFile(foreign, elfHeader(other), 0o755)
	_, err = deploy.Deploy(ctx, h, foreign, target, arch)
	if err == nil || !strings.Contains(err.Error(), "built for "+otherName) || !strings.Contains(err.Error(), "GOARCH=") {
		t.Errorf("deploying an %s binary: %v, want a refusal naming the architecture and the fix", otherName, err)
	}
	if _, err := a.Output("test", "-e", target); err == nil {
		t.Errorf("a refused binary was uploaded to %s", target)
	}

	// Not an ELF file at all.
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if _, err := deploy.Deploy(ctx, h, script, target, arch); err == nil || !strings.Contains(err.Error(), "ELF") {
		t.Errorf("deploying a non-ELF file: %v", err)
	}

	// This test binary is built for this machine, as are the hosts.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(self)
	res, err := deploy.Deploy(ctx, h, self, target, arch)
	if err != nil || res.UpToDate || res.BytesSent != fi.Size() {
		t.Fatalf("first deploy = %+v, %v; want %d bytes sent", res, err, fi.Size())
	}
	if out := a.Run(t, target, "-test.list", "TestDeploy"); strings.TrimSpace(out) != "TestDeploy" {
		t.Errorf("the deployed binary does not run on the host: %q", out)
	}
	res, err = deploy.Deploy(ctx, h, self, target, arch)
	if err != nil || !res.UpToDate || res.BytesSent != 0 {
		t.Errorf("second deploy = %+v, %v; want up to date", res, err)
	}

	t.Run("TwoUsersOnePath", func(t *testing.T) { testTwoUsersOnePath(ctx, t, n, arch) })
}

// Two roles on one host as two users (issue 19), each with the default
// per-user node.remote_path (issue 31): ten first runs in a row, both
// roles deploying at once, and each user uploads once, to a directory of
// its own; a shared path, which one of them would own, is refused to the
// other.
func testTwoUsersOnePath(ctx context.Context, t *testing.T, n *testhosts.Net, arch string) {
	a := n.Hosts["a"]
	var hosts []*remote.SSH
	for _, user := range []string{n.User, testhosts.PeerUser} {
		h, err := remote.DialSSH(ctx, remote.SSHConfig{
			Address: a.Addr, User: user, IdentityFile: n.KeyFile,
			KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
			ConfigFile: filepath.Join(t.TempDir(), "none"), ConnectTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts = append(hosts, h)
	}
	m := map[string]elf.Machine{"x86_64": elf.EM_X86_64, "aarch64": elf.EM_AARCH64}[arch]
	if m == elf.EM_NONE {
		t.Fatalf("no ELF machine in this test for a %s host", arch)
	}
	node := append(elfHeader(m), make([]byte, 1<<20)...)
	rand.Read(node[64:])
	local := filepath.Join(t.TempDir(), "node")
	os.WriteFile(local, node, 0o755)

	for i := range 10 {
		res := make([]remote.UploadResult, len(hosts))
		errs := make([]error, len(hosts))
		var wg sync.WaitGroup
		for j, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[j], errs[j] = deploy.Deploy(ctx, h, local, fmt.Sprintf("%s/two-users-%d-%d/node", testhosts.DeployDir, i, j), arch)
			}()
		}
		wg.Wait()
		for j := range hosts {
			if errs[j] != nil {
				t.Fatalf("run %d: deploy as %s: %v", i+1, hosts[j].Name(), errs[j])
			}
			if res[j].BytesSent == 0 {
				t.Errorf("run %d: deploy as %s = %+v: want its own upload", i+1, hosts[j].Name(), res[j])
			}
		}
	}
	shared := testhosts.DeployDir + "/two-users-0-0/node"
	var unsafe *remote.UnsafePathError
	if _, err := deploy.Deploy(ctx, hosts[1], local, shared, arch); !errors.As(err, &unsafe) {
		t.Errorf("deploy as %s to %s's path = %v; want an UnsafePathError", testhosts.PeerUser, n.User, err)
	}
}
