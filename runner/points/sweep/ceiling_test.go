package sweep

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/testbed/testenv"
)

// ceilingSetup is a cold point whose 8 MiB file, on this machine's disk,
// exists as node serve would have made it, and a Ceilings for it on the
// local host that keeps its warnings.
func ceilingSetup(t *testing.T) (*Ceilings, plan.Point, *[]string) {
	t.Helper()
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		testenv.Skip(t, dir+" is not on a disk here")
	}
	file := filepath.Join(dir, "f.dat")
	if err := os.WriteFile(file, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse("cold.yaml", []byte(fmt.Sprintf(`name: cold
hosts:
  server: {address: local}
  client: {address: local}
transport: tcp
server: {file: %s, file_size: 8MiB, cache: cold}
output: {csv: out.csv, logs: logs}
`, file)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	c := &Ceilings{
		Targets: []role.Target{{Role: "server", Host: remote.Local{}, Label: "server (local)"}, {Role: "client", Host: remote.Local{}, Label: "client (local)"}},
		Rec:     &manifest.Record{Path: filepath.Join(dir, "run.json"), M: &manifest.Manifest{}},
		Info:    func(string) {},
		Warn:    func(msg string) { warned = append(warned, msg) },
	}
	return c, pts[0], &warned
}

func coldRows() []results.Row {
	return []results.Row{{Status: results.StatusOK, ServerHost: "local", Params: map[string]string{"cache": "cold"}}}
}

// With fio on the host, a cold row gets the ceiling the manifest on disk
// holds; it is measured once, however many cold points follow.
func TestCeilingSetOnColdRowsOnce(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	c, pt, warned := ceilingSetup(t)
	rows := coldRows()
	c.Set(context.Background(), pt, rows)
	c.Set(context.Background(), pt, coldRows())
	m, err := manifest.Read(c.Rec.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(*warned) != 0 || len(m.DiskCeilings) != 1 || rows[0].DiskCeilingMBs == nil || *rows[0].DiskCeilingMBs != m.DiskCeilings[0].MBs || !(m.DiskCeilings[0].MBs > 0) {
		t.Fatalf("warnings %q, %d manifest ceilings, row's cell %v; want one positive ceiling on the row and in the manifest", *warned, len(m.DiskCeilings), rows[0].DiskCeilingMBs)
	}
}

// Without fio on the host, exec warns once, naming the package, and the
// cell stays empty.
func TestCeilingWithoutFioWarnsOnce(t *testing.T) {
	stat, err := exec.LookPath("stat")
	if err != nil {
		testenv.Skip(t, "no stat here")
	}
	c, pt, warned := ceilingSetup(t)
	bin := t.TempDir()
	if err := os.Symlink(stat, filepath.Join(bin, "stat")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	rows := coldRows()
	c.Set(context.Background(), pt, rows)
	c.Set(context.Background(), pt, coldRows())
	if len(*warned) != 1 || !strings.Contains((*warned)[0], "install the fio package") || rows[0].DiskCeilingMBs != nil || len(c.Rec.M.DiskCeilings) != 0 {
		t.Fatalf("warnings %q, cell %v, manifest %+v; want one warning naming fio and nothing measured", *warned, rows[0].DiskCeilingMBs, c.Rec.M.DiskCeilings)
	}
}
