package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// These tests are issue 31's: on a shared host other local users are
// untrusted, and the runner never runs a node they could have swapped.

// userPlan is a five-point plan whose roles log in as user, server on a
// and client on b (or both on a when b is nil), with node at its default
// per-user path unless remotePath is set.
func userPlan(t *testing.T, dir string, n *testhosts.Net, a, b *testhosts.Host, user, remotePath string) (plan, csv string) {
	t.Helper()
	if b == nil {
		b = a
	}
	node := ""
	if remotePath != "" {
		node = ", remote_path: " + remotePath
	}
	text := fmt.Sprintf(`name: deploy-path
hosts:
  server: {address: %s, user: %s, identity_file: %s}
  client: {address: %s, user: %s, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 20s}
node: {binary: %s%s}
transport: tcp
server: {file: %s/%s.dat, file_size: 1MiB, create: true, cache: warm}
client: {queue_depth: 2, total: 1MiB}
sweep: {matrix: {block_size: [4KiB, 8KiB, 16KiB, 32KiB, 64KiB]}}
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/points.csv, logs: out/logs}
`, a.Addr, user, n.KeyFile, b.Addr, user, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), node, testhosts.DeployDir, filepath.Base(dir))
	plan = filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return plan, filepath.Join(dir, "out/points.csv")
}

// uidOf is user's uid on h.
func uidOf(t *testing.T, h *testhosts.Host, user string) string {
	return strings.TrimSpace(h.Run(t, "id", "-u", user))
}

// asUser runs a shell script on h as user.
func asUser(t *testing.T, h *testhosts.Host, user, script string, args ...string) {
	t.Helper()
	h.Run(t, append([]string{"runuser", "-u", user, "--", "sh", "-c", script, "sh"}, args...)...)
}

// A hostile local user (testhosts.PeerUser) makes the victim's deploy
// directory first: the shared directory of an explicit node.remote_path,
// or the victim's own per-user default, 0755 holding a copy of the real
// node or 0777, then renames a program over that copy. The victim's exec
// refuses, naming the directory, its owner and its mode, with a hint; or,
// with the default path while the attacker holds an old shared one, it
// deploys to its own path and runs its five points. The attacker's
// program never runs.
func TestExecRefusesHostileDeployDir(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	env := clitest.SSHEnv(t)
	victim, attacker := n.User, testhosts.PeerUser
	uid := uidOf(t, a, victim)
	own := testhosts.VarTmp + "/rdmasweep-" + uid
	// The attacker's copy of the real node (the same build is public).
	stash := testhosts.DeployDir + "/stash-node"
	a.Run(t, "install", "-m", "755", filepath.Join(binDir, "node"), stash)

	for _, c := range []struct {
		name, dir, mode string
		remotePath      string // "" for the default
		refused         bool
	}{
		{"shared 0755 with a copy", testhosts.DeployDir + "/shared-755", "755", testhosts.DeployDir + "/shared-755/node", true},
		{"shared 0777", testhosts.DeployDir + "/shared-777", "777", testhosts.DeployDir + "/shared-777/node", true},
		{"shared 0755 with a copy, default path", testhosts.DeployDir + "/shared-default", "755", "", false},
		{"per-user 0755 with a copy", own, "755", "", true},
		{"per-user 0777", own, "777", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := testhosts.DeployDir + "/swapped-in-ran"
			a.Run(t, "rm", "-rf", own, marker)
			asUser(t, a, attacker, `mkdir -m "$1" "$2" && chmod "$1" "$2" && cp "$3" "$2/node"`, c.mode, c.dir, stash)
			dir := t.TempDir()
			plan, csv := userPlan(t, dir, n, a, b, victim, c.remotePath)
			// After the victim's first point, if it gets one, the
			// attacker renames its own program over the copy; the
			// remaining points and the next exec would run it.
			p := startRunner(t, dir, env, "exec", plan)
			p.Until(t, "a row or the end of the exec", time.Minute, func() bool {
				_, exited := p.Exited()
				rows, err := os.ReadFile(csv)
				return exited || err == nil && strings.Count(string(rows), "\n") >= 2
			})
			asUser(t, a, attacker, `printf '#!/bin/sh\ntouch %s\n' "$2" > "$1/.x" && chmod 755 "$1/.x" && mv -f "$1/.x" "$1/node"`, c.dir, marker)
			r := clitest.Result{Code: p.Wait(t, 3*time.Minute), Stderr: p.Stderr()}
			r2 := runnerEnv(t, dir, env, "exec", plan, "--rerun")
			if _, err := a.Output("test", "-e", marker); err == nil {
				t.Fatalf("the attacker's program ran as %s\nfirst exec:\n%s\nsecond:\n%s", victim, r.Stderr, r2.Stderr)
			}
			if !c.refused {
				if r.Code != 0 || r2.Code != 0 || !strings.Contains(r.Stderr, "deployed node to "+own+"/node") {
					t.Fatalf("exec with the default path: exit %d, then %d; want it deployed to %s\n%s\n%s", r.Code, r2.Code, own, r.Stderr, r2.Stderr)
				}
				if rows := clitest.ReadRows(t, csv); len(rows) != 10 {
					t.Errorf("%d rows, want 5 points twice", len(rows))
				}
				return
			}
			t.Logf("the refusal:\n%s", r.Stderr)
			for i, r := range []clitest.Result{r, r2} {
				if r.Code == 0 {
					t.Fatalf("exec %d of 2 into %s's %s directory passed:\n%s", i+1, attacker, c.mode, r.Stderr)
				}
				for _, want := range []string{c.dir, "owner " + attacker, "another user owns it", "runner: hint:", "node.remote_path"} {
					if !strings.Contains(r.Stderr, want) {
						t.Errorf("exec %d of 2: stderr does not say %q:\n%s", i+1, want, r.Stderr)
					}
				}
			}
			if rows, err := os.ReadFile(csv); err == nil && strings.Contains(string(rows), ",ok,") {
				t.Errorf("a point ran:\n%s", rows)
			}
		})
	}
}

// Between two points of one exec, the victim's own node is replaced by
// another build (renamed over it, same user, different content): the
// next points refuse it, by node's check of its own sha256, before it
// serves anything, and say why.
func TestExecRefusesReplacedNode(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan, csv := userPlan(t, dir, n, a, b, n.User, "")
	// Points of 3 s, so the swap lands while point 2 reads: a point of
	// 1 MiB ends within a poll of WaitRows, and point 3 could start
	// with the old file before the swap.
	text, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plan, []byte(strings.Replace(string(text), "total: 1MiB", "duration: 3s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	target := testhosts.VarTmp + "/rdmasweep-" + uidOf(t, a, n.User) + "/node"
	p := startRunner(t, dir, env, "exec", plan)
	p.WaitRows(t, csv, 1)
	// Another build: the same node with bytes appended still runs.
	asUser(t, a, n.User, `cp "$1" "$1.other" && printf 'another build' >> "$1.other" && mv -f "$1.other" "$1"`, target)
	code := p.Wait(t, 3*time.Minute)
	rows := clitest.ReadRows(t, csv)
	if code == 0 || len(rows) != 5 {
		t.Fatalf("exec with node replaced after point 1: exit %d, %d rows\n%s", code, len(rows), p.Stderr())
	}
	// Point 2 may have started before the swap; from point 3 on every
	// point's server is the replaced file.
	for _, row := range rows[2:] {
		if row.Status != results.StatusFailed || !strings.Contains(row.Error, "not the node the runner deployed") {
			t.Errorf("point %s after the swap: %s %q; want refused by node's self-check", row.PointKey, row.Status, row.Error)
		}
	}
	// The next exec finds the file changed and deploys its node again.
	r := runnerEnv(t, dir, env, "exec", plan, "--rerun")
	if r.Code != 0 || !strings.Contains(r.Stderr, "deployed node to "+target) {
		t.Errorf("next exec: exit %d; want node deployed again\n%s", r.Code, r.Stderr)
	}
}

// Two users on one host whose sshd has MaxStartups 1:100:1, five execs at
// once: each deploys to its own per-user directory, owned by it and 0700,
// and all five pass.
func TestTwoUsersDeployAtOnce(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"busy"}, SSHDConfig: map[string]string{"busy": "MaxStartups 1:100:1"}})
	h := n.Hosts["busy"]
	env := clitest.SSHEnv(t)
	users := []string{n.User, testhosts.PeerUser, n.User, testhosts.PeerUser, n.User}
	res := make([]clitest.Result, len(users))
	var wg sync.WaitGroup
	for i, user := range users {
		dir := t.TempDir()
		plan, _ := userPlan(t, dir, n, h, nil, user, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runnerEnv(t, dir, env, "exec", plan, "--only", "block_size=4KiB")
		}()
	}
	wg.Wait()
	passed := 0
	for i, r := range res {
		own := testhosts.VarTmp + "/rdmasweep-" + uidOf(t, h, users[i]) + "/node"
		if r.Code != 0 || !strings.Contains(r.Stderr, own) {
			t.Errorf("exec %d of %d as %s: exit %d; want it run with %s\n%s", i+1, len(users), users[i], r.Code, own, r.Stderr)
			continue
		}
		passed++
	}
	t.Logf("%d of %d execs at once passed", passed, len(users))
	for _, user := range []string{n.User, testhosts.PeerUser} {
		dir := testhosts.VarTmp + "/rdmasweep-" + uidOf(t, h, user)
		if got := h.Run(t, "stat", "-c", "%U %a", dir, dir+"/node"); got != user+" 700\n"+user+" 755\n" {
			t.Errorf("%s's deploy directory and node: %q, want %s's, 700 and 755", user, got, user)
		}
	}
}

// Issue 42: runner clean deploys nothing, and ran the node it found at
// the deploy path as it was. A hostile local user (testhosts.PeerUser)
// makes root's default deploy directory, /var/tmp/rdmasweep-0, first,
// with its own program as node, and plants a sidecar beside root's own
// data file in the shared directory; NVMe-oF records on the host are what
// makes clean run node. clean --yes refuses the path, naming it, its
// owner and a hint, and runs and removes nothing. Once the directory is
// gone, clean keeps the data file: a sidecar of another user's vouches
// for nothing.
func TestCleanRunsNothingAnotherUserPlanted(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	env := clitest.SSHEnv(t)
	const victim = "root"
	attacker := testhosts.PeerUser
	dir := t.TempDir()
	plan, _ := userPlan(t, dir, n, a, b, victim, "")
	own := testhosts.VarTmp + "/rdmasweep-0"
	data := fmt.Sprintf("%s/%s.dat", testhosts.DeployDir, filepath.Base(dir))
	marker := testhosts.DeployDir + "/attacker-ran"
	records := testhosts.RunDir + "/nvmeof"
	a.Run(t, "sh", "-c", `printf precious > "$1"`, "sh", data)
	asUser(t, a, attacker, `mkdir -m 755 "$1" && printf '#!/bin/sh\ntouch %s\n' "$3" > "$1/node" && chmod 755 "$1/node" && printf '{"seed":1,"size":8}\n' > "$2.rdmasweep"`, own, data, marker)
	a.Run(t, "sh", "-c", `mkdir -p -m 700 "$1" && echo '{}' > "$1/planted.json"`, "sh", records)
	untouched := func(what string) {
		t.Helper()
		if _, err := a.Output("test", "-e", marker); err == nil {
			t.Fatalf("%s: the attacker's program ran as root", what)
		}
		for _, f := range []string{data, data + ".rdmasweep"} {
			if _, err := a.Output("test", "-f", f); err != nil {
				t.Errorf("%s: %s was removed", what, f)
			}
		}
		if got := a.Run(t, "cat", data); got != "precious" {
			t.Errorf("%s: the data file holds %q", what, got)
		}
	}

	for _, args := range [][]string{{"--yes"}, {"--dry-run"}} {
		r := runnerEnv(t, dir, env, append([]string{"clean", plan}, args...)...)
		untouched("clean " + args[0])
		if r.Code == 0 {
			t.Fatalf("clean %s with another user's deploy directory passed:\n%s", args[0], r.Stderr)
		}
		for _, want := range []string{own, "owner " + attacker, "another user owns it", "runner: hint:"} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("clean %s: stderr does not say %q:\n%s", args[0], want, r.Stderr)
			}
		}
		for _, f := range []string{own + "/node", records + "/planted.json"} {
			if _, err := a.Output("test", "-e", f); err != nil {
				t.Errorf("clean %s removed %s", args[0], f)
			}
		}
	}

	// The directory gone (and the records, which clean would now remove
	// with the build's node), only the planted sidecar is left.
	a.Run(t, "rm", "-rf", own, records)
	r := runnerEnv(t, dir, env, "clean", plan, "--yes")
	untouched("clean --yes after the directory went")
	if r.Code != 0 || !strings.Contains(r.Stderr, "keeping "+data+": its sidecar is not a regular file of yours (owner "+attacker+")") {
		t.Errorf("clean with a planted sidecar: exit %d; want it to keep %s, saying why\n%s", r.Code, data, r.Stderr)
	}

	// With no node there, NVMe-oF records are removed by the build's
	// node, deployed for it through the guarded upload and run through
	// the guard, then removed. This record's maker (this test) still
	// runs, so nvmeof-clean keeps it and touches nothing of the kernel's.
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[19]
	a.Run(t, "sh", "-c", `mkdir -p -m 700 "$1" && printf '{"pid":%s,"start_time":"%s"}\n' "$2" "$3" > "$1/live.json"`, "sh", records, fmt.Sprint(os.Getpid()), start)
	r = runnerEnv(t, dir, env, "clean", plan, "--yes")
	untouched("clean --yes of NVMe-oF records")
	if r.Code != 0 || !strings.Contains(r.Stderr, "deployed node to "+own+"/node to remove NVMe-oF records") {
		t.Errorf("clean of NVMe-oF records: exit %d; want the build's node deployed to %s and run\n%s", r.Code, own, r.Stderr)
	}
	if _, err := a.Output("test", "-e", own+"/node"); err == nil {
		t.Errorf("clean left the node it deployed at %s/node", own)
	}
	if _, err := a.Output("test", "-e", records+"/live.json"); err != nil {
		t.Errorf("nvmeof-clean removed the record of a live maker: %v", err)
	}
}
