package vmtest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
)

// nvmeofFile is the server's file on the NVMe drive that both node and
// nvmeof read, and nvmeofSize its size.
const (
	nvmeofFile = "/mnt/nvme/rdmasweep-nvmeof.dat"
	nvmeofSize = 8 << 20
)

// nvmeofNoModule: with nvmet-rdma unloaded and its file moved out of the
// server's module tree, runner check fails the server's NVMEOF cell
// naming the module, and runner exec refuses before any point: no row,
// no subsystem. The module is put back after.
func (l *wireLab) nvmeofNoModule(t *testing.T) {
	ko := strings.TrimSpace(l.server.sh(t, "find /lib/modules -name 'nvmet-rdma.ko*'"))
	l.server.sh(t, "set -e; if [ -d /sys/module/nvmet_rdma ]; then rmmod nvmet_rdma; fi; mv "+ko+" /tmp/nvmet-rdma.ko; depmod -a")
	defer l.server.sh(t, "mv /tmp/nvmet-rdma.ko "+ko+" && depmod -a")
	plan := l.plan(t, "wire-nvmeof-nomod", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 8, total: 1MiB}
sweep:
  matrix:
    workload: [nvmeof]
`, nvmeofFile, nvmeofSize>>20))
	out, errOut, err := runRunner(l.ctx, l.runner, l.dir, l.env, "check", plan)
	t.Logf("runner check: %v\n%s%s", err, out, errOut)
	if err == nil || !strings.Contains(out, "NVMEOF") || !strings.Contains(out+errOut, "missing module nvmet-rdma") {
		t.Errorf("runner check: %v; want it failed, with an NVMEOF column saying missing module nvmet-rdma", err)
	}
	out, errOut, err = runRunner(l.ctx, l.runner, l.dir, l.env, "exec", plan)
	t.Logf("runner exec: %v\n%s%s", err, out, errOut)
	if err == nil || !strings.Contains(errOut, "kernel module nvmet-rdma") {
		t.Errorf("runner exec: %v; want it refused, naming the kernel module nvmet-rdma", err)
	}
	if rows, _ := csvfile.Read(filepath.Join(l.dir, "out", "wire-nvmeof-nomod.csv")); len(rows) > 0 {
		t.Errorf("runner exec wrote %d rows; want it refused before any point", len(rows))
	}
	l.noneLeft(t)
}

// handNQN is a subsystem made by hand on the server before a run, which
// no teardown or clean may touch.
const handNQN = "nqn.2014-08.org.example:by-hand"

// nvmeofKill: in the middle of a time-based nvmeof point, the runner is
// stopped, both node commands (the pids their records name) and then the
// runner are SIGKILLed, so the target, the controller and their records stay; runner
// clean then leaves neither guest any of them, and a subsystem made by
// hand before the run is still there.
func (l *wireLab) nvmeofKill(t *testing.T) {
	hand := "/sys/kernel/config/nvmet/subsystems/" + handNQN
	l.server.sh(t, "modprobe nvmet && mkdir "+hand)
	defer l.server.sh(t, "rmdir "+hand)
	plan := l.plan(t, "wire-nvmeof-kill", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 8, duration: 60s}
sweep:
  matrix:
    workload: [nvmeof]
`, nvmeofFile, nvmeofSize>>20))
	cmd := exec.CommandContext(l.ctx, l.runner, "exec", plan)
	cmd.Dir, cmd.Env = l.dir, l.env
	var stderr consoleLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Both sides made what they record, and fio reads.
	const pids = `cat /run/rdmasweep/nvmeof/*.json 2>/dev/null | sed -n 's/.*"pid":\([0-9]*\).*/\1/p'`
	var srv, cli string
	for start := time.Now(); srv == "" || cli == "" || !strings.Contains(l.client.sh(t, "ps -o comm"), "fio"); {
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("no target and controller recorded after 2 minutes (server %q, client %q)\n%s", srv, cli, stderr.String())
		}
		time.Sleep(time.Second)
		srv, cli = strings.TrimSpace(l.server.sh(t, pids)), strings.TrimSpace(l.client.sh(t, pids))
	}
	// The runner is stopped first, so it cannot tear the other side down
	// cleanly when it sees the first one die.
	cmd.Process.Signal(syscall.SIGSTOP)
	l.server.sh(t, "kill -9 "+strings.Join(strings.Fields(srv), " "))
	l.client.sh(t, "kill -9 "+strings.Join(strings.Fields(cli), " "))
	cmd.Process.Kill()
	cmd.Wait()
	left := "ls /sys/kernel/config/nvmet/subsystems /run/rdmasweep/nvmeof; grep -L '^pcie$' /sys/class/nvme/*/transport 2>/dev/null; true"
	t.Logf("after the kills: server %q; client %q", l.server.sh(t, left), l.client.sh(t, left))
	out, errOut, err := runRunner(l.ctx, l.runner, l.dir, l.env, "clean", "--yes", plan)
	t.Logf("runner clean: %v\n%s%s", err, out, errOut)
	if err != nil {
		t.Fatalf("runner clean: %v", err)
	}
	l.noneLeft(t)
	if strings.TrimSpace(l.server.sh(t, "test -d "+hand+" && echo kept || true")) != "kept" {
		t.Errorf("the hand-made subsystem %s is gone after runner clean", handNQN)
	}
}

// nvmeofCorrupt: a byte of the server's file changed (in the page cache
// the target reads with buffered_io, and on the drive) fails the nvmeof
// row, naming the block's offset and the byte's; the file is restored.
func (l *wireLab) nvmeofCorrupt(t *testing.T) {
	const at = 5 // in the first block, which the sample always checks
	flip := fmt.Sprintf(`b=$(od -An -tu1 -j%d -N1 %s); printf "\\$(printf %%o $(( (b+1)%%256 )))" | dd of=%s bs=1 seek=%d conv=notrunc 2>/dev/null; echo $b`, at, nvmeofFile, nvmeofFile, at)
	if strings.TrimSpace(l.server.sh(t, "test -f "+nvmeofFile+results.SidecarSuffix+" && echo made || true")) != "made" {
		t.Fatalf("%s is not there as node made it: Corrupt needs Rows before it", nvmeofFile)
	}
	orig := strings.TrimSpace(l.server.sh(t, flip))
	defer l.server.sh(t, fmt.Sprintf(`printf "\\$(printf %%o %s)" | dd of=%s bs=1 seek=%d conv=notrunc 2>/dev/null`, orig, nvmeofFile, at))
	_, stderr, err := runRunner(l.ctx, l.runner, l.dir, l.env, "exec", l.nvmeofPlan(t), "--out", "out/wire-nvmeof-bad.csv",
		"--set", "transport="+results.TransportTCP, "--only", "workload=nvmeof", "--only", "block_size=64KiB")
	rows, rerr := csvfile.Read(filepath.Join(l.dir, "out", "wire-nvmeof-bad.csv"))
	if rerr != nil || len(rows) != 1 {
		t.Fatalf("exec: %v; rows %d (%v)\n%s", err, len(rows), rerr, stderr)
	}
	r := rows[0]
	t.Logf("byte %d changed (was %s): %s: %s", at, orig, r.Status, r.Error)
	if err == nil || r.Status != results.StatusFailed || !strings.Contains(r.Error, "offset 0 ") || !strings.Contains(r.Error, fmt.Sprintf("byte offset %d", at)) {
		t.Errorf("status %q, error %q (exec: %v); want failed, naming the block at offset 0 and byte offset %d", r.Status, r.Error, err, at)
	}
	l.noneLeft(t)
}

// nvmeofPlan is the plan of node and nvmeof at three block sizes, each
// point a few MiB (4 KiB reads are slow under TCG).
func (l *wireLab) nvmeofPlan(t *testing.T) string {
	return l.plan(t, "wire-nvmeof", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: warm, registration: pinned}
client: {queue_depth: 8, verify: true}
sweep:
  zip:
    block_size: [4KiB, 64KiB, 1MiB]
    total: [512KiB, 4MiB, 8MiB]
  matrix:
    workload: [node, nvmeof]
`, nvmeofFile, nvmeofSize>>20))
}

// nvmeofRows runs the plan over rdma, then its nvmeof points over tcp
// from the cold file, into one CSV, and holds the rows and the summary's
// ratios.
func (l *wireLab) nvmeofRows(t *testing.T) {
	plan := l.nvmeofPlan(t)
	rows := l.exec(t, plan, "wire-nvmeof")
	// Cold: nvmet reads the file with O_DIRECT (buffered_io 0).
	rows = l.exec(t, plan, "wire-nvmeof", "--set", "transport="+results.TransportTCP, "--set", "cache=cold", "--only", "workload=nvmeof")
	seen := map[string]bool{}
	for _, r := range rows {
		key := r.Param("workload") + "/" + r.Transport() + "/" + r.Param("block_size")
		seen[key] = true
		t.Logf("%s: %s %s, %.2f MB/s, iops %s, p99 %s µs, verified %v", key, r.Status, r.Error, deref(r.BandwidthMBs), fmtPtr(r.IOPS), fmtPtr(r.LatP99Us), r.Verified != nil && *r.Verified)
		if r.Status != results.StatusOK || r.Verified == nil || !*r.Verified {
			t.Errorf("%s: status %q %q, verified %v; want ok and verified", key, r.Status, r.Error, r.Verified)
		}
	}
	for _, bs := range []string{"4096", "65536", "1048576"} {
		for _, k := range []string{"node/rdma/", "nvmeof/rdma/", "nvmeof/tcp/"} {
			if !seen[k+bs] {
				t.Errorf("no %s%s row in the CSV (have %v)", k, bs, seen)
			}
		}
	}
	out, stderr, err := runRunner(l.ctx, l.runner, l.dir, l.env, "summary", "--baseline", "workload=node", filepath.Join(l.dir, "out", "wire-nvmeof.csv"))
	if err != nil {
		t.Fatalf("runner summary: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("runner summary --baseline workload=node:\n%s", out)
	for _, bs := range []string{"4KiB", "64KiB", "1MiB"} {
		if r := summaryRatio(out, bs); r <= 0 {
			t.Errorf("summary has no nvmeof/node ratio at %s", bs)
		} else {
			t.Logf("nvmeof/node at %s: %.2f", bs, r)
		}
	}
	// qps 2: two I/O queues (nr_io_queues), each read by its own fio job
	// over its own half of the namespace, from the cold file: the kernel
	// takes the connect options, and the halves make the whole total.
	rows = l.exec(t, plan, "wire-nvmeof-qps", "--out", "out/wire-nvmeof-qps.csv", "--set", "qps=2", "--set", "cache=cold", "--only", "workload=nvmeof", "--only", "block_size=64KiB")
	if len(rows) != 1 {
		t.Fatalf("qps 2: %d rows, want 1", len(rows))
	}
	r := rows[0]
	t.Logf("qps 2: %s %s, %.2f MB/s, %s bytes, verified %v", r.Status, r.Error, deref(r.BandwidthMBs), fmtInt(r.Bytes), r.Verified != nil && *r.Verified)
	if r.Status != results.StatusOK || r.Param("qps") != "2" || r.Bytes == nil || *r.Bytes != 4<<20 || r.Verified == nil || !*r.Verified {
		t.Errorf("qps 2: status %q %q, qps %s, bytes %s, verified %v; want ok, 4 MiB, verified", r.Status, r.Error, r.Param("qps"), fmtInt(r.Bytes), r.Verified)
	}
	l.noneLeft(t)
}

// summaryRatio is the RATIO cell of the summary's ratio table (the one
// whose header has RATIO) on the rdma nvmeof row at block size bs, or 0.
func summaryRatio(out, bs string) float64 {
	col := -1
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "RATIO"); i >= 0 {
			col = i
			continue
		}
		if col < 0 || len(f) <= col || f[0] != results.TransportRDMA || f[1] != bs || !slices.Contains(f, "nvmeof") {
			continue
		}
		if r, err := strconv.ParseFloat(f[col], 64); err == nil {
			return r
		}
	}
	return 0
}

// noneLeft holds both guests to no subsystem, port, host entry or fabric
// controller after the runs, and no record of one.
func (l *wireLab) noneLeft(t *testing.T) {
	t.Helper()
	// A fabric controller is one whose transport is not pcie.
	left := "find /sys/kernel/config/nvmet/subsystems /sys/kernel/config/nvmet/ports /sys/kernel/config/nvmet/hosts /run/rdmasweep/nvmeof -mindepth 1 -maxdepth 1 2>/dev/null | grep -v " + handNQN + "; grep -L '^pcie$' /sys/class/nvme/*/transport 2>/dev/null; true"
	s, c := strings.TrimSpace(l.server.sh(t, left)), strings.TrimSpace(l.client.sh(t, left))
	if s != "" || c != "" {
		t.Errorf("left after the runs: server %q, client %q", s, c)
	}
}
