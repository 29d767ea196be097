package sweep

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// scriptedHost is a host whose commands are answered, not run: fio
// reports probeMBs for the ceiling's probe and gridMBs for each grid run;
// noFio makes fio missing and fs is what stat -f says. It keeps each argv.
type scriptedHost struct {
	remote.Local
	probeMBs, gridMBs float64
	noFio             bool
	fs                string
	ran               [][]string
}

func (h *scriptedHost) Name() string { return "alice@10.0.0.1:22" }

func (h *scriptedHost) Run(ctx context.Context, argv []string) ([]byte, error) {
	h.ran = append(h.ran, argv)
	a := strings.Join(argv, " ")
	switch {
	case argv[0] == "fio" && h.noFio:
		return nil, &remote.ExitError{Status: 127, Stderr: []byte("fio: command not found")}
	case a == "fio --version":
		return []byte("fio-3.33\n"), nil
	case argv[0] == "fio":
		mbs := h.gridMBs
		if strings.Contains(a, " --iodepth=4 ") {
			mbs = h.probeMBs
		}
		return fmt.Appendf(nil, `{"jobs":[{"error":0,"read":{"io_bytes":%d,"runtime":1000}}]}`, int64(mbs*1e6)), nil
	case argv[0] == "stat":
		return []byte(h.fs + "\n"), nil
	}
	return nil, nil // node prepare
}

// ceilingPoints are a plan's warm point and two cold ones on host h,
// and a Ceilings for it that keeps its warnings.
func ceilingPoints(t *testing.T, h remote.Host) (*Ceilings, []plan.Point, *[]string) {
	t.Helper()
	p, err := plan.Parse("cold.yaml", []byte(`name: cold
hosts:
  server: {address: local}
  client: {address: local}
transport: tcp
server: {file: /data/f.dat, file_size: 64MiB, create: true}
sweep:
  matrix: {cache: [warm, cold], block_size: [1MiB, 64KiB]}
output: {csv: out.csv, logs: logs}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	c := &Ceilings{
		Targets: []role.Target{{Role: "server", Host: h, Label: "server (alice)", NodePath: "/opt/node"}, {Role: "client", Host: h, Label: "client (alice)", NodePath: "/opt/node"}},
		Rec:     &manifest.Record{Path: filepath.Join(t.TempDir(), "run.json"), M: &manifest.Manifest{}},
		Info:    func(string) {},
		Warn:    func(msg string) { warned = append(warned, msg) },
	}
	return c, pts, &warned
}

// TestCeilingBeforeFirstColdPoint: a warm point measures nothing; the
// first cold point has its file made cold by node prepare, then the probe,
// then the grid's runs that keep at most a second of the probe's rate in
// flight; a second cold point measures nothing again. The cold rows get
// the grid's best run (the probe's only when no grid run fits), in the
// manifest too; warm rows stay empty.
func TestCeilingBeforeFirstColdPoint(t *testing.T) {
	for _, c := range []struct {
		name              string
		probeMBs, gridMBs float64
		runs              int
	}{
		{"fast", 2000, 2500, 7},     // every grid run of at most 128 requests in flight
		{"throttled", 8, 9, 2},      // 8 MB in flight: 128 KiB × 32, one job
		{"probe best", 500, 300, 7}, // the probe is not the ceiling
		{"no grid", 0.1, 9, 1},      // 100 kB in flight: no grid run fits, so the probe is
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &scriptedHost{probeMBs: c.probeMBs, gridMBs: c.gridMBs, fs: "ext2/ext3"}
			cs, pts, warned := ceilingPoints(t, h)
			ctx := context.Background()
			for _, pt := range pts {
				cs.Before(ctx, pt)
				if pt.Values.Str(param.Cache) == "warm" && len(h.ran) > 0 {
					t.Fatalf("a warm point measured the ceiling: %q", h.ran)
				}
			}
			if len(*warned) != 0 {
				t.Fatalf("warnings: %q", *warned)
			}
			want := []string{"fio --version", "/opt/node prepare --transport tcp --file /data/f.dat --file-size 67108864 --create --cache cold", "stat -f -c %T -- /data/f.dat"}
			for i, w := range want {
				if i >= len(h.ran) || strings.Join(h.ran[i], " ") != w {
					t.Fatalf("command %d: %q, want %q (all: %q)", i+1, h.ran[min(i, len(h.ran)-1)], w, h.ran)
				}
			}
			fio := h.ran[len(want):]
			if len(fio) != c.runs || !strings.Contains(strings.Join(fio[0], " "), " --iodepth=4 ") {
				t.Fatalf("%d fio runs, want %d, the probe first: %q", len(fio), c.runs, fio)
			}
			m, err := manifest.Read(cs.Rec.Path)
			if err != nil {
				t.Fatal(err)
			}
			best := c.gridMBs
			if c.runs == 1 {
				best = c.probeMBs
			}
			if len(m.DiskCeilings) != 1 || m.DiskCeilings[0].MBs != best || len(m.DiskCeilings[0].Runs) != c.runs {
				t.Fatalf("manifest disk_ceilings %+v, want one of %v MB/s over %d runs", m.DiskCeilings, best, c.runs)
			}
			rows := []results.Row{
				{Status: results.StatusOK, ServerHost: h.Name(), Params: map[string]string{"cache": "cold"}},
				{Status: results.StatusOK, ServerHost: h.Name(), Params: map[string]string{"cache": "warm"}},
			}
			cs.Set(rows)
			if rows[0].DiskCeilingMBs == nil || *rows[0].DiskCeilingMBs != best || rows[1].DiskCeilingMBs != nil {
				t.Fatalf("cold row %v, warm row %v; want %v and empty", rows[0].DiskCeilingMBs, rows[1].DiskCeilingMBs, best)
			}
		})
	}
}

// Without fio, or with the file on tmpfs, exec warns once, saying what to
// do, and the cells stay empty.
func TestCeilingNotMeasured(t *testing.T) {
	for _, c := range []struct {
		name string
		h    *scriptedHost
		want string
	}{
		{"no fio", &scriptedHost{noFio: true}, "install the fio package"},
		{"tmpfs", &scriptedHost{fs: "tmpfs"}, "/data/f.dat is on tmpfs, with no disk under it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs, pts, warned := ceilingPoints(t, c.h)
			for _, pt := range pts {
				cs.Before(context.Background(), pt)
			}
			rows := []results.Row{{Status: results.StatusOK, ServerHost: c.h.Name(), Params: map[string]string{"cache": "cold"}}}
			cs.Set(rows)
			if len(*warned) != 1 || !strings.Contains((*warned)[0], c.want) || rows[0].DiskCeilingMBs != nil || len(cs.Rec.M.DiskCeilings) != 0 {
				t.Fatalf("warnings %q, cell %v, manifest %+v; want one warning saying %q and nothing measured", *warned, rows[0].DiskCeilingMBs, cs.Rec.M.DiskCeilings, c.want)
			}
		})
	}
}
