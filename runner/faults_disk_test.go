package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// Faults of a full file system: on the remote host, and under the runner's CSV. See faults_test.go for the table every fault joins and the
// harness it runs in.

// remoteDiskFull is (i): a's disk fills while node is uploaded.
func remoteDiskFull() fault {
	const tiny = 1 << 20
	full := testhosts.DeployDir + "/tiny"
	remotePath := full + "/bin/node"
	return fault{
		name: "i_remote_disk_full", sweep: onePoint, tally: true, code: 1, wait: 3 * time.Minute,
		setup: func(f *faultRun) []string {
			st, err := os.Stat(filepath.Join(binDir, "node"))
			if err != nil {
				f.Fatal(err)
			}
			if st.Size() <= tiny {
				f.Fatalf("node binary is %d bytes, too small to overflow a %d-byte disk", st.Size(), tiny)
			}
			f.a.Run(f, "mkdir", "-p", full)
			f.a.Run(f, "mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(tiny)+",mode=0755", "tmpfs", full)
			f.Cleanup(func() { f.a.Output("umount", full) })
			return []string{"--set", "node.remote_path=" + remotePath}
		},
		check: func(f *faultRun) {
			stderr := f.r.Stderr()
			if !strings.Contains(stderr, "runner: error: "+hostLabel("server", f.a)+": deploy node to "+remotePath+": ") {
				f.Fatalf("stderr:\n%s", stderr)
			}
			if !strings.Contains(stderr, "runner: hint: the host's disk is full: ") {
				f.Errorf("the error does not say the disk is full:\n%s", stderr)
			}
			if _, err := f.a.Output("test", "-e", remotePath); err == nil {
				f.Fatalf("a half-written node is at %s", remotePath)
			}
			if out := f.a.Run(f, "ls", "-A", full+"/bin"); strings.TrimSpace(out) != "" {
				f.Fatalf("upload left files behind: %s", out)
			}
			if rows := clitest.WholeCSV(f, f.csv); len(rows) != 0 {
				f.Fatalf("a point ran: %+v", rows)
			}
		},
	}
}

// (g): the CSV sits on a filesystem that fills up.
func TestFaultCSVOnFullFilesystem(t *testing.T) {
	testenv.NeedRoot(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "tiny")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// The exec writes its manifest beside the CSV before the first row;
	// measure how many pages this plan's manifest takes on a roomy disk.
	page := os.Getpagesize()
	probeDir := t.TempDir()
	probe := runner(t, probeDir, "exec", loopbackPlan(t, probeDir, ""), "--out", filepath.Join(probeDir, "test.csv"), "--only", "block_size=1MiB")
	manifests, _ := filepath.Glob(filepath.Join(probeDir, "*.json"))
	if probe.Code != 0 || len(manifests) != 1 {
		t.Fatalf("probe exec: %d %v\n%s", probe.Code, manifests, probe.Stderr)
	}
	st, err := os.Stat(manifests[0])
	if err != nil {
		t.Fatal(err)
	}
	manifestPages := int(st.Size())/page + 2 // and slack for a longer run id or path
	// One page for a filler, the manifest's pages, and one page for the
	// CSV, so a row that crosses the CSV's first page boundary finds no
	// space (a short write).
	size := strconv.Itoa((2 + manifestPages) * page)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	// The filler takes what the manifest will not need.
	if err := os.WriteFile(filepath.Join(mnt, "slack"), make([]byte, (manifestPages-int(st.Size())/page-1)*page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, page), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(mnt, "test.csv")
	padCSV(t, csv, int64(page-500))
	before, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	earlier := len(clitest.ReadRows(t, csv))

	r := runner(t, dir, "exec", loopbackPlan(t, dir, ""), "--out", csv)
	t.Logf("runner stderr:\n%s", r.Stderr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "no space left on device") || !strings.Contains(r.Stderr, "runner: hint: ") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	after, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, before) {
		t.Fatalf("rows already in the CSV were changed")
	}
	rows := clitest.WholeCSV(t, csv)
	added := len(rows) - earlier
	// The runner stopped at the row it could not write: every point that
	// ran has its row, but for that last one.
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.server.log"))
	if len(logs) != added+1 || added >= 3 {
		t.Fatalf("%d points ran, %d rows added: the runner measured on\n%s", len(logs), added, r.Stderr)
	}
	if pids := localNodes(t); len(pids) != 0 {
		t.Fatalf("nodes left: %v", pids)
	}
	if left, _ := filepath.Glob(csv + ".state*"); len(left) != 0 {
		t.Fatalf("state files left on the full filesystem: %v", left)
	}
}

// padCSV makes path a results CSV of exactly size bytes, with rows of
// another plan that the runner must keep intact.
func padCSV(t *testing.T, path string, size int64) {
	t.Helper()
	c, err := csvfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	row := results.Row{RunID: "earlier", Plan: "other", PointKey: "0000000000000000", Repetition: 1, Status: results.StatusFailed, Error: "x"}
	st, _ := os.Stat(path)
	if err := c.Append(row); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(path)
	rowSize := st2.Size() - st.Size()
	row.Error = strings.Repeat("x", int(size-st2.Size()-rowSize)+1)
	if err := c.Append(row); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != size {
		t.Fatalf("padded %s to %d bytes, want %d", path, st.Size(), size)
	}
}
