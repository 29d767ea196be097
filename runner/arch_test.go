package main

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/slurmlab"
	"rdmasweep/testbed/testhosts"
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

// fakeArch makes `uname -m` on h print arch until the test ends.
func fakeArch(t *testing.T, h *testhosts.Host, arch string) {
	t.Helper()
	fakeCommand(t, h, "/usr/bin/uname", "#!/bin/sh\necho "+arch+"\n")
	if got := strings.TrimSpace(h.Run(t, "uname", "-m")); got != arch {
		t.Fatalf("uname -m on %s says %q after faking %q", h.Name, got, arch)
	}
}

// fakeCommand replaces the command at path on h with script until the
// test ends: bind-mounted over it in h's own mount namespace, so nothing
// outside the host sees it. {orig} in script is a copy of the original.
func fakeCommand(t *testing.T, h *testhosts.Host, path, script string) {
	t.Helper()
	dir := t.TempDir()
	orig := filepath.Join(dir, filepath.Base(path)+".orig")
	h.Run(t, "cp", path, orig)
	fake := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(fake, []byte(strings.ReplaceAll(script, "{orig}", orig)), 0o755); err != nil {
		t.Fatal(err)
	}
	h.Run(t, "mount", "--bind", fake, path)
	t.Cleanup(func() {
		if _, err := h.Output("umount", path); err != nil {
			t.Errorf("restore %s on %s: %v", path, h.Name, err)
		}
	})
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
		if rows, err := csvfile.Read(filepath.Join(dir, "out/hosts.csv")); err != nil || len(rows) > 0 {
			t.Errorf("CSV after a refused exec: %d rows, %v", len(rows), err)
		}
	}

	// check says the same, on the client's row.
	r = runnerEnv(t, dir, env, "check", plan, "--set", "node.binary="+filepath.Join(build, "node"))
	if r.Code != 1 || !strings.Contains(r.Stderr, "the host is riscv64; this build has nodes for x86_64, aarch64") {
		t.Errorf("check: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestSlurmBroadcastsEachArchitecturesNode: under Slurm, sbcast sends a
// file to every node of the allocation, so each architecture's node goes
// to a path of its own: an x86-64 server's node to node.remote_path, an
// aarch64 client's to node.remote_path-linux-arm64, and every node holds
// both, neither overwriting the other. (The aarch64 node is real, but an
// x86-64 machine cannot run it: its host is x86-64 with uname faked, so
// only the deploy is judged here; the arm64 guest runs it for real.) Then
// clean removes both from both.
func TestSlurmBroadcastsEachArchitecturesNode(t *testing.T) {
	c := slurmlab.Start(t)
	job := c.Allocate(t, slurmlab.AllocOptions{Nodes: 2})
	n2 := c.Nodes["n2"]
	script := filepath.Join(t.TempDir(), "uname")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho aarch64\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := n2.Output("mount", "--bind", script, "/usr/bin/uname"); err != nil {
		t.Fatalf("fake uname on n2: %v %s", err, out)
	}
	t.Cleanup(func() { n2.Output("umount", "/usr/bin/uname") })

	build := t.TempDir()
	node, arm64Node := filepath.Join(build, "node"), filepath.Join(build, "node-linux-arm64")
	if err := os.Symlink(filepath.Join(binDir, "node"), node); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-tags", "netgo,osusergo", "-o", arm64Node, "../node")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the arm64 node: %v\n%s", err, out)
	}
	dir := t.TempDir()
	env := append(append(os.Environ(), job.Env...), "HOME="+dir)
	// The default node.remote_path, for the runner's own uid: Slurm's
	// steps run as it.
	deployed := fmt.Sprintf("%s/rdmasweep-%d", slurmlab.VarTmp, os.Getuid())
	plan := filepath.Join(dir, "slurm.yaml")
	if err := os.WriteFile(plan, []byte(fmt.Sprintf(`name: slurm-arches
launcher: slurm
node: {binary: %s}
server: {file: %s/slurm.dat, file_size: 1MiB, create: true}
client: {block_size: 64KiB, total: 1MiB}
output: {csv: out/slurm.csv, logs: out/logs}
`, node, slurmlab.LocalDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runnerEnv(t, dir, env, "check", plan)
	for _, want := range []string{"server (n1): deployed node to " + deployed + "/node ", "client (n2): deployed node to " + deployed + "/node-linux-arm64 "} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("check's stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	sum := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	for _, name := range []string{"n1", "n2"} {
		out, err := c.Nodes[name].Output("sha256sum", deployed+"/node", deployed+"/node-linux-arm64")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := sum(node) + "  " + deployed + "/node\n" + sum(arm64Node) + "  " + deployed + "/node-linux-arm64\n"; out != want {
			t.Errorf("%s holds\n%swant\n%s", name, out, want)
		}
	}

	// clean removes both architectures' nodes from every node of the
	// allocation, whichever architecture the host is.
	r = runnerEnv(t, dir, env, "clean", plan, "--yes")
	if r.Code != 0 {
		t.Fatalf("clean: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, name := range []string{"n1", "n2"} {
		for _, path := range []string{deployed + "/node", deployed + "/node-linux-arm64"} {
			if !strings.Contains(r.Stdout, path) {
				t.Errorf("clean's list lacks %s:\n%s", path, r.Stdout)
			}
			if out, err := c.Nodes[name].Output("ls", path); err == nil {
				t.Errorf("%s still holds %s after clean", name, out)
			}
		}
	}
}
