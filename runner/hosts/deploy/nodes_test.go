package deploy_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/deploy"
)

// build writes files of the given ELF machines into a new directory and
// returns it.
func build(t *testing.T, files map[string]elf.Machine) string {
	t.Helper()
	dir := t.TempDir()
	for name, m := range files {
		if err := os.WriteFile(filepath.Join(dir, name), elfHeader(m), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNodesForEachArchitecture: node.binary serves its own architecture,
// the node-linux-GOARCH beside it the others; a host of any other
// architecture is refused with the list of what the build has, before
// anything could be uploaded.
func TestNodesForEachArchitecture(t *testing.T) {
	dir := build(t, map[string]elf.Machine{
		"node":             elf.EM_X86_64,
		"node-linux-amd64": elf.EM_X86_64, // make build's copy of bin/node
		"node-linux-arm64": elf.EM_AARCH64,
	})
	ns, err := deploy.FindNodes(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range ns {
		got = append(got, filepath.Base(n.Path)+":"+n.Arch)
	}
	if want := []string{"node:x86_64", "node-linux-arm64:aarch64"}; !slices.Equal(got, want) {
		t.Errorf("nodes %v, want %v", got, want)
	}
	for _, tc := range []struct{ uname, file, remote string }{
		{"x86_64", "node", "/var/tmp/rdmasweep/node"},
		{"aarch64", "node-linux-arm64", "/var/tmp/rdmasweep/node-linux-arm64"},
		{"arm64", "node-linux-arm64", "/var/tmp/rdmasweep/node-linux-arm64"}, // macOS and the BSDs say arm64
		{"aarch64\n", "node-linux-arm64", "/var/tmp/rdmasweep/node-linux-arm64"},
	} {
		n, err := ns.For(tc.uname)
		if err != nil || filepath.Base(n.Path) != tc.file || n.RemotePath("/var/tmp/rdmasweep/node") != tc.remote {
			t.Errorf("For(%q) = %s at %s, %v; want %s at %s", tc.uname, n.Path, n.RemotePath("/var/tmp/rdmasweep/node"), err, tc.file, tc.remote)
		}
	}

	_, err = ns.For("riscv64")
	var no *deploy.NoNodeError
	if !errors.As(err, &no) || err.Error() != "the host is riscv64; this build has nodes for x86_64, aarch64" {
		t.Errorf("For(riscv64) = %v, want the NoNodeError naming what the build has", err)
	}
	if no != nil && (!strings.Contains(no.Hint(), "GOARCH=riscv64") || !strings.Contains(no.Hint(), "bin/node-linux-riscv64")) {
		t.Errorf("hint %q does not say how to build a node for riscv64", no.Hint())
	}
	if _, err := ns.For(""); err == nil || !strings.Contains(err.Error(), "uname -m printed nothing") {
		t.Errorf("For(\"\") = %v", err)
	}
}

// TestNodesAloneAndOnArm64: a build of one node offers that node alone;
// an arm64 node.binary serves arm64 hosts at node.remote_path and leaves
// x86-64 ones to node-linux-amd64 at a path of its own.
func TestNodesAloneAndOnArm64(t *testing.T) {
	dir := build(t, map[string]elf.Machine{"node": elf.EM_X86_64})
	ns, err := deploy.FindNodes(filepath.Join(dir, "node"))
	if err != nil || len(ns) != 1 {
		t.Fatalf("FindNodes = %v, %v", ns, err)
	}
	if _, err := ns.For("aarch64"); err == nil || err.Error() != "the host is aarch64; this build has nodes for x86_64" {
		t.Errorf("For(aarch64) = %v", err)
	}

	dir = build(t, map[string]elf.Machine{"node": elf.EM_AARCH64, "node-linux-amd64": elf.EM_X86_64})
	ns, err = deploy.FindNodes(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := ns.For("x86_64")
	if err != nil || !x.Sibling || x.RemotePath("/opt/n") != "/opt/n-linux-amd64" {
		t.Errorf("For(x86_64) = %+v, %v", x, err)
	}
	a, err := ns.For("aarch64")
	if err != nil || a.Sibling || a.RemotePath("/opt/n") != "/opt/n" {
		t.Errorf("For(aarch64) = %+v, %v", a, err)
	}
}

// TestNodesMisnamed: a node-linux-GOARCH built for another architecture is
// a build mistake, refused rather than shipped to the wrong hosts.
func TestNodesMisnamed(t *testing.T) {
	dir := build(t, map[string]elf.Machine{"node": elf.EM_X86_64, "node-linux-arm64": elf.EM_X86_64})
	_, err := deploy.FindNodes(filepath.Join(dir, "node"))
	if err == nil || !strings.Contains(err.Error(), "node-linux-arm64 is built for x86_64, not arm64") {
		t.Errorf("FindNodes with a misnamed node = %v", err)
	}
	os.WriteFile(filepath.Join(dir, "node-linux-arm64"), []byte("#!/bin/sh\n"), 0o755)
	if _, err := deploy.FindNodes(filepath.Join(dir, "node")); err == nil || !strings.Contains(err.Error(), "ELF") {
		t.Errorf("FindNodes with a script beside node = %v", err)
	}
	if _, err := deploy.FindNodes(filepath.Join(dir, "missing")); err == nil {
		t.Error("FindNodes of a missing node.binary succeeded")
	}
}

// TestTransportsFromBuildInfo: a node's transports are read from its
// build information without running it; a tcp-only node says tcp. (An
// rdma node's, for both architectures, are held to `node version --json`
// by runner's arm64 guest test.)
func TestTransportsFromBuildInfo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "node")
	cmd := exec.Command("go", "build", "-tags", "netgo,osusergo", "-o", bin, "rdmasweep/node")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build an arm64 node: %v\n%s", err, out)
	}
	ts, err := deploy.Transports(bin)
	if err != nil || !slices.Equal(ts, []string{"tcp"}) {
		t.Errorf("Transports of a tcp-only arm64 node = %v, %v", ts, err)
	}
	if _, err := deploy.Transports(filepath.Join(build(t, map[string]elf.Machine{"node": elf.EM_X86_64}), "node")); err == nil {
		t.Error("Transports of a file without Go build information succeeded")
	}
}
