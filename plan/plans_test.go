package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// TestCheckedInPlans loads, validates and expands every plan in plans/, so
// a schema change cannot leave them stale, and checks that none would make
// the runner warn about too few reads.
func TestCheckedInPlans(t *testing.T) {
	files, err := filepath.Glob("../plans/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d plans in ../plans, want at least loopback.yaml and ssd-sweep.yaml", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			p, err := Load(file, Options{NodeBinary: "bin/node"})
			if err != nil {
				t.Fatalf("load:\n%v", err)
			}
			if want := strings.TrimSuffix(filepath.Base(file), ".yaml"); p.Name != want {
				t.Errorf("name %q, want the file's name %q", p.Name, want)
			}
			pts, err := Expand(p, ExpandOptions{})
			if err != nil {
				t.Fatalf("expand:\n%v", err)
			}
			keys := map[string]int{}
			for _, pt := range pts {
				if j, dup := keys[pt.Key]; dup {
					t.Errorf("points %d and %d share key %s", j, pt.Index, pt.Key)
				}
				keys[pt.Key] = pt.Index
				if pt.Values.Duration(param.Duration) == 0 && pt.ExpectedReads() < 1000 {
					t.Errorf("point %d %v makes %d reads; the runner warns below 1000", pt.Index, pt.Swept, pt.ExpectedReads())
				}
			}
		})
	}
}

func TestLoopbackPlan(t *testing.T) {
	p, err := Load("../plans/loopback.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Hosts.Server().IsLocal() || !p.Hosts.Client().IsLocal() || p.Transport() != "tcp" {
		t.Errorf("loopback must be two local roles over tcp: %+v, %s", p.Hosts, p.Transport())
	}
	if !strings.HasPrefix(p.Base.Str(param.File), "/tmp/") || !p.Base.Bool(param.Create) {
		t.Errorf("loopback file %q (create %v): want a created file under /tmp", p.Base.Str(param.File), p.Base.Bool(param.Create))
	}
	pts, err := Expand(p, ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first, last := pts[0].Values.Int(param.BlockSize), pts[len(pts)-1].Values.Int(param.BlockSize); first != 4<<20 || last != 4<<10 || len(pts) != 11 {
		t.Errorf("block sizes %s..%s in %d points, want 4MiB..4KiB in 11", results.FormatSize(first), results.FormatSize(last), len(pts))
	}
	// "Runs in seconds": bound the bytes moved over loopback.
	var bytes int64
	for _, pt := range pts {
		bytes += pt.Values.Int(param.Total)
	}
	if bytes == 0 || bytes > 16<<30 {
		t.Errorf("loopback reads %s in all; want a bounded, non-zero total", results.FormatSize(bytes))
	}
	if p.Output.CSV != "out/loopback.csv" {
		t.Errorf("output.csv = %q", p.Output.CSV)
	}
}

// TestSSDSweepPlan: the headline plan reads its file once a point, cold
// points first, block sizes 16MiB..4KiB, with no warmup, so each row's
// end_to_end_mb_s is the SSD's figure; and never fewer than 1024 reads.
func TestSSDSweepPlan(t *testing.T) {
	p, err := Load("../plans/ssd-sweep.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Transport() != "rdma" || !strings.Contains(string(p.Source), "EDIT") {
		t.Errorf("ssd-sweep: transport %s; placeholders marked EDIT: %v", p.Transport(), strings.Contains(string(p.Source), "EDIT"))
	}
	pts, err := Expand(p, ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, pt := range pts {
		v := pt.Values
		if v.Int(param.Total) != v.Int(param.FileSize) || v.Duration(param.Duration) != 0 || v.Duration(param.Warmup) != 0 {
			t.Errorf("point %v: total %d of a %d-byte file, duration %v, warmup %v; want one pass, untimed, no warmup",
				pt.Swept, v.Int(param.Total), v.Int(param.FileSize), v.Duration(param.Duration), v.Duration(param.Warmup))
		}
		if pt.ExpectedReads() < 1024 {
			t.Errorf("point %v reads only %d blocks", pt.Swept, pt.ExpectedReads())
		}
		if want := int64(16<<20) >> (i % 13); v.Int(param.BlockSize) != want {
			t.Errorf("point %d: block_size %d, want %d (16MiB halving to 4KiB)", i, v.Int(param.BlockSize), want)
		}
	}
	if len(pts) != 26 || pts[0].Values.Str(param.Cache) != "cold" || pts[13].Values.Str(param.Cache) != "warm" {
		t.Errorf("%d points; want 26, cache the outer loop, cold first", len(pts))
	}
}

// TestDocsNameEveryField holds docs/plan.md to the loader: every field a
// plan may write (the --set vocabulary) is named there.
func TestDocsNameEveryField(t *testing.T) {
	doc, err := os.ReadFile("../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range setPaths {
		name := strings.Replace(strings.Replace(path, "hosts.server.", "hosts.<role>.", 1), "hosts.client.", "hosts.<role>.", 1)
		if strings.HasSuffix(path, ".data_address") {
			name = "hosts.server.data_address" // where the client dials; the client's own is unused
		}
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/plan.md does not name `%s`", name)
		}
	}
}
