package main

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/internal/clitest"
	"rdmasweep/results"
	"rdmasweep/runner/remote/testhosts"
)

// aarch64Header is the smallest file debug/elf reads as an aarch64
// executable: a build's node-linux-arm64 as far as choosing goes.
func aarch64Header() []byte {
	b := make([]byte, 64)
	copy(b, []byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)})
	le := binary.LittleEndian
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(elf.EM_AARCH64))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[58:], 64)
	return b
}

// fakeArch makes `uname -m` on h print arch until the test ends: a script
// bind-mounted over uname in h's own mount namespace, so nothing outside
// the host sees it.
func fakeArch(t *testing.T, h *testhosts.Host, arch string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "uname")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho "+arch+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.Run(t, "mount", "--bind", script, "/usr/bin/uname")
	t.Cleanup(func() {
		if _, err := h.Output("umount", "/usr/bin/uname"); err != nil {
			t.Errorf("restore uname on %s: %v", h.Name, err)
		}
	})
	if got := strings.TrimSpace(h.Run(t, "uname", "-m")); got != arch {
		t.Fatalf("uname -m on %s says %q after faking %q", h.Name, got, arch)
	}
}

// TestExecRefusesAHostNoNodeRunsOn: with nodes for x86_64 and aarch64 in
// the build, a riscv64 client stops the exec before any point and before
// anything is uploaded, even to the server that has a node, with what the
// build has and how to build a node for the host.
func TestExecRefusesAHostNoNodeRunsOn(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	fakeArch(t, b, "riscv64")
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	build := t.TempDir()
	if err := os.Symlink(filepath.Join(binDir, "node"), filepath.Join(build, "node")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "node-linux-arm64"), aarch64Header(), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := twoHostPlan(t, dir, n, "")

	r := runnerEnv(t, dir, env, "exec", plan, "--set", "node.binary="+filepath.Join(build, "node"))
	want := "runner: error: client (root@" + b.Addr + ":22): the host is riscv64; this build has nodes for x86_64, aarch64\n"
	if r.Code != 1 || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "runner: hint: build one beside node.binary") || !strings.Contains(r.Stderr, "GOARCH=riscv64") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and %q with a hint", r.Code, r.Stderr, want)
	}
	if strings.Contains(r.Stderr, "deployed") {
		t.Errorf("a node was deployed although a host has none:\n%s", r.Stderr)
	}
	if out := a.Run(t, "ls", "-A", testhosts.DeployDir); strings.Contains(out, "bin dir") {
		t.Errorf("the server host got node although the exec could not run: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out/hosts.csv")); err == nil {
		if rows, err := results.ReadCSV(filepath.Join(dir, "out/hosts.csv")); err != nil || len(rows) > 0 {
			t.Errorf("CSV after a refused exec: %d rows, %v", len(rows), err)
		}
	}

	// check says the same, on the client's row.
	r = runnerEnv(t, dir, env, "check", plan, "--set", "node.binary="+filepath.Join(build, "node"))
	if r.Code != 1 || !strings.Contains(r.Stderr, "the host is riscv64; this build has nodes for x86_64, aarch64") {
		t.Errorf("check: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}
