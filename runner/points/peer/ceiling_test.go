package peer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCeilingRunsSpanTheGrid: the ceiling reads with O_DIRECT through
// io_uring, at every block, depth and job count of the grid, each job
// over its own range of the file in whole blocks; a grid point whose
// ranges hold no block is left out, and so is one that would keep more
// bytes in flight than the probe read in a second, or more than
// CeilingMaxRequests requests.
func TestCeilingRunsSpanTheGrid(t *testing.T) {
	for _, c := range []struct {
		size, inFlight int64
		want           int
	}{
		{1 << 30, 1 << 40, 6},    // not 128 deep × 4 jobs: 512 requests in flight
		{1536 << 10, 1 << 40, 5}, // 1 MiB blocks fit one job's range, not four's
		{64 << 10, 1 << 40, 0},
		{1 << 30, 32 << 20, 4}, // 1 MiB × 32; 128 KiB × 32 (1 and 4 jobs) and × 128
		{1 << 30, 8 << 20, 1},  // a drive at 8 MB/s: 128 KiB × 32
		{1 << 30, 2 << 20, 0},  // at 2 MB/s the probe alone
	} {
		runs := CeilingRuns("/data/f", c.size, c.inFlight)
		if len(runs) != c.want {
			t.Errorf("file of %d bytes, %d in flight: %d runs, want %d", c.size, c.inFlight, len(runs), c.want)
		}
		seen := map[string]bool{}
		for _, argv := range runs {
			a := " " + strings.Join(argv, " ") + " "
			if strings.Contains(a, " --time_based ") {
				t.Errorf("a grid run is time-based: %s", a)
			}
			for _, w := range []string{" --direct=1 ", " --ioengine=io_uring ", " --readonly ", " --rw=read ", " --filename=/data/f ", " --group_reporting ", " --runtime=2s "} {
				if !strings.Contains(a, w) {
					t.Errorf("ceiling run lacks %q: %s", w, a)
				}
			}
			bs, depth, jobs := num(t, argv, "--bs="), num(t, argv, "--iodepth="), num(t, argv, "--numjobs=")
			size, inc := num(t, argv, "--size="), num(t, argv, "--offset_increment=")
			if inc != size || size < bs || size%bs != 0 || size*jobs > c.size {
				t.Errorf("jobs' ranges overlap, or hold no whole block, or pass the file's end: %s", a)
			}
			if depth*jobs > CeilingMaxRequests {
				t.Errorf("%d requests in flight, over %d: %s", depth*jobs, CeilingMaxRequests, a)
			}
			if bs*depth*jobs > c.inFlight {
				t.Errorf("%d bytes in flight, over %d: %s", bs*depth*jobs, c.inFlight, a)
			}
			if !slices.Contains(CeilingBlocks, bs) || !slices.Contains(CeilingDepths, int(depth)) || !slices.Contains(CeilingJobs, int(jobs)) || depth < 32 || depth > 128 {
				t.Errorf("run off the grid: %s", a)
			}
			k := strconv.FormatInt(bs, 10) + "/" + strconv.FormatInt(depth, 10) + "/" + strconv.FormatInt(jobs, 10)
			if seen[k] {
				t.Errorf("run %s twice", k)
			}
			seen[k] = true
		}
	}
}

// TestCeilingProbe: the probe reads whole 1 MiB blocks, 4 in flight, one
// job, with O_DIRECT; a file of less than a block gets none.
func TestCeilingProbe(t *testing.T) {
	argv := CeilingProbe("/data/f", 5<<20+1)
	a := " " + strings.Join(argv, " ") + " "
	for _, w := range []string{" --direct=1 ", " --ioengine=io_uring ", " --readonly ", " --bs=1048576 ", " --iodepth=4 ", " --numjobs=1 ", " --size=5242880 ", " --time_based ", " --ramp_time=250ms ", " --runtime=500ms ", " --output-format=json "} {
		if !strings.Contains(a, w) {
			t.Errorf("probe lacks %q: %s", w, a)
		}
	}
	if argv := CeilingProbe("/data/f", 1<<20-1); argv != nil {
		t.Errorf("probe of a file smaller than a block: %v", argv)
	}
}

// TestCeilingIsTheBestRun reads real ceiling runs (testdata/fio-ceiling,
// made by TestFixturesCeiling): each read its jobs' ranges once, and the
// ceiling is the fastest of them.
func TestCeilingIsTheBestRun(t *testing.T) {
	paths, err := filepath.Glob("testdata/fio-ceiling/*.json")
	if err != nil || len(paths) < 2 {
		t.Fatalf("%d ceiling fixtures (%v), want 2", len(paths), err)
	}
	var reports [][]byte
	var fastest float64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cmd, err := os.ReadFile(strings.TrimSuffix(p, ".json") + ".cmd")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(cmd)), "\n")
		argv := strings.Fields(lines[len(lines)-1])
		r, err := parseFio(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if want := num(t, argv, "--size=") * num(t, argv, "--numjobs="); r.Bytes != want {
			t.Errorf("%s: %d bytes read, want each job's range once, %d", p, r.Bytes, want)
		}
		reports = append(reports, b)
		fastest = max(fastest, r.BandwidthMBs)
	}
	for range 2 { // in either order
		got, best, err := Ceiling(reports)
		if err != nil || got != fastest || got <= 0 {
			t.Errorf("Ceiling = %v (run %d), %v; want the fastest run's %v", got, best, err, fastest)
		}
		slices.Reverse(reports)
	}
	if _, _, err := Ceiling(append(reports, []byte("{"))); err == nil {
		t.Error("Ceiling took a report that does not parse")
	}
	if _, _, err := Ceiling(nil); err == nil {
		t.Error("Ceiling of no runs gave a figure")
	}
}

// num is the integer value of argv's option prefix ("--bs=").
func num(t *testing.T, argv []string, prefix string) int64 {
	t.Helper()
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s%s: %v", prefix, v, err)
			}
			return n
		}
	}
	t.Fatalf("argv has no %s: %v", prefix, argv)
	return 0
}
