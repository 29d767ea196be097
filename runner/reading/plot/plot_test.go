package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
)

// The fixture is a cache sweep (cold, warm) over block sizes, with
// file_size zipped to block size, repeats, and one failed run.
func fixture(t *testing.T) []results.Row {
	t.Helper()
	rows, err := csvfile.Read("testdata/sweep.csv")
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func TestBuildSplitsByCacheNotByZippedFileSize(t *testing.T) {
	series := mustBuild(t, fixture(t))
	type want struct {
		bs         int64
		n          int
		bw, bwSD   float64
		p50, p50SD float64
		p99, p99SD float64
	}
	cases := []struct {
		label  string
		points []want
	}{
		{"cache=cold", []want{
			{4 << 10, 2, 105, math.Sqrt(50), 11, math.Sqrt(2), 25, math.Sqrt(50)},
			{64 << 10, 1, 400, 0, 50, 0, 80, 0}, // its second run failed
			{1 << 20, 3, 1000, 100, 310, 10, 600, 100},
		}},
		{"cache=warm", []want{
			{4 << 10, 2, 200, 0, 5, 0, 10, math.Sqrt(2)},
			{1 << 20, 1, 2000, 0, 100, 0, 150, 0},
		}},
	}
	if len(series) != len(cases) {
		t.Fatalf("%d series, want %d: %+v", len(series), len(cases), series)
	}
	for i, c := range cases {
		s := series[i]
		if s.Label != c.label {
			t.Errorf("series %d is %q, want %q", i, s.Label, c.label)
		}
		if len(s.Points) != len(c.points) {
			t.Fatalf("%s: %d points, want %d: %+v", s.Label, len(s.Points), len(c.points), s.Points)
		}
		for j, w := range c.points {
			p := s.Points[j]
			if p.X != float64(w.bs) || p.N != w.n {
				t.Errorf("%s point %d: block size %d from %d runs, want %d from %d", s.Label, j, int64(p.X), p.N, w.bs, w.n)
			}
			for _, f := range []struct {
				what string
				got  Stat
				mean float64
				sd   float64
			}{
				{"bandwidth", p.BandwidthMBs, w.bw, w.bwSD},
				{"p50", p.LatP50Us, w.p50, w.p50SD},
				{"p99", p.LatP99Us, w.p99, w.p99SD},
			} {
				if !near(f.got.Mean, f.mean) || !near(f.got.SD, f.sd) {
					t.Errorf("%s %s %s: %g ± %g, want %g ± %g", s.Label, results.FormatSize(int64(p.X)), f.what, f.got.Mean, f.got.SD, f.mean, f.sd)
				}
			}
		}
	}
}

func TestSplitOnlyByParametersIndependentOfBlockSize(t *testing.T) {
	ok := func(bs int64, qd int, total int64) results.Row {
		bw := 1.0
		return results.Row{Status: results.StatusOK, Params: map[string]string{"transport": "tcp", "block_size": fmt.Sprint(bs), "queue_depth": fmt.Sprint(qd), "total": fmt.Sprint(total)}, BandwidthMBs: &bw}
	}
	cases := []struct {
		name   string
		rows   []results.Row
		labels []string
	}{
		{"nothing varies", []results.Row{ok(4096, 1, 1<<20), ok(8192, 1, 1<<20)}, []string{"all runs"}},
		// total doubles with block size: a property of the x axis.
		{"varies with block size", []results.Row{ok(4096, 1, 1<<20), ok(8192, 1, 2<<20), ok(4096, 1, 1<<20)}, []string{"all runs"}},
		{"varies independently", []results.Row{ok(4096, 1, 1<<20), ok(4096, 8, 1<<20), ok(8192, 1, 2<<20), ok(8192, 8, 2<<20)},
			[]string{"queue_depth=1", "queue_depth=8"}},
		// Every block size sees one queue depth, but the sweep crossed
		// them at one block size: that is enough to split.
		{"crossed at one block size", []results.Row{ok(4096, 1, 1<<20), ok(4096, 8, 1<<20), ok(8192, 1, 1<<20)},
			[]string{"queue_depth=1", "queue_depth=8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var labels []string
			for _, s := range mustBuild(t, c.rows) {
				labels = append(labels, s.Label)
			}
			if strings.Join(labels, "|") != strings.Join(c.labels, "|") {
				t.Errorf("series %q, want %q", labels, c.labels)
			}
		})
	}
}

func TestWriteFilePNGAndSVG(t *testing.T) {
	series := mustBuild(t, fixture(t))
	dir := t.TempDir()

	pngPath := filepath.Join(dir, "chart.png")
	if err := WriteFile(pngPath, "fixture", "block_size", series); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
		t.Errorf("PNG is %dx%d", b.Dx(), b.Dy())
	}

	svgPath := filepath.Join(dir, "chart.svg")
	if err := WriteFile(svgPath, "fixture", "block_size", series); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	// The legend and the axis labels are text in the SVG.
	for _, want := range []string{"<svg", "cache=cold", "cache=warm", "4KiB", "1MiB", "bandwidth (MB/s)"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestWriteFileRefusesWhatItCannotDraw(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "chart.pdf"), "", "block_size", mustBuild(t, fixture(t))); !errors.Is(err, ErrFormat) {
		t.Errorf("pdf: %v, want ErrFormat", err)
	}
	if err := WriteFile(filepath.Join(dir, "chart.png"), "", "block_size", nil); !errors.Is(err, ErrNoData) {
		t.Errorf("no series: %v, want ErrNoData", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused plot left files: %v", entries)
	}
}

// TestConstantXRefused: rows with one value of x draw one-point series,
// so Build refuses them, naming the numeric parameters that do vary, or
// saying none does.
func TestConstantXRefused(t *testing.T) {
	bw, lat := 10.0, 5.0
	row := func(qd string) results.Row {
		return results.Row{Status: results.StatusOK, Params: map[string]string{"block_size": "4096", "queue_depth": qd}, BandwidthMBs: &bw, LatP50Us: &lat, LatP99Us: &lat}
	}
	_, err := Build([]results.Row{row("1"), row("16")}, "block_size")
	if !errors.Is(err, ErrConstantX) || !strings.Contains(err.Error(), "-x queue_depth") {
		t.Errorf("block_size constant, queue_depth varying: %v; want ErrConstantX naming -x queue_depth", err)
	}
	_, err = Build([]results.Row{row("1")}, "block_size")
	if !errors.Is(err, ErrConstantX) || !strings.Contains(err.Error(), "no numeric parameter varies") {
		t.Errorf("one row: %v; want ErrConstantX saying nothing varies", err)
	}
	if series, err := Build([]results.Row{row("1"), row("16")}, "queue_depth"); err != nil || len(series) != 1 || len(series[0].Points) != 2 {
		t.Errorf("-x queue_depth: %+v, %v; want one series of two points", series, err)
	}
}

// TestSeriesNeverNamedByHost: rows that differ only in their hosts (a
// port in the address) are one series, not one per host.
func TestSeriesNeverNamedByHost(t *testing.T) {
	bw := 10.0
	row := func(bs, host string) results.Row {
		return results.Row{Status: results.StatusOK, ServerHost: host, ClientHost: host, Params: map[string]string{"block_size": bs, "workload": "node"}, BandwidthMBs: &bw}
	}
	series, err := Build([]results.Row{row("4096", "root@127.0.0.1:42443"), row("65536", "root@127.0.0.1:42443"), row("4096", "root@127.0.0.1:40001"), row("65536", "root@127.0.0.1:40001")}, "block_size")
	if err != nil || len(series) != 1 || strings.Contains(series[0].Label, "127.0.0.1") {
		t.Errorf("series %+v, %v; want one, not named by host", series, err)
	}
}

func TestPlainTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 2700, "0 500 1000 1500 2000 2500"},
		{0, 3200, "0 500 1000 1500 2000 2500 3000"},
		{0, 90, "0 20 40 60 80"},
		{0.1, 0.75, "0.1 0.2 0.3 0.4 0.5 0.6 0.7"},
		{0, 1e6, "0 200000 400000 600000 800000 1000000"},
	} {
		var labels []string
		for _, tk := range (plainTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("ticks %v..%v = %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

func mustBuild(t *testing.T, rows []results.Row) []Series {
	t.Helper()
	s, err := Build(rows, "block_size")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Along clients, as docs/scale.md draws a fan-in's knee: the aggregate and
// the client rows are two series, block size is not the axis.
func TestAlongClients(t *testing.T) {
	row := func(scope string, k int, bw float64) results.Row {
		return results.Row{Status: results.StatusOK, Scope: scope, BandwidthMBs: &bw,
			Params: map[string]string{"block_size": "65536", "clients": fmt.Sprint(k)}}
	}
	rows := []results.Row{row("client", 1, 100), row("aggregate", 1, 100), row("client", 2, 90), row("client", 2, 90), row("aggregate", 2, 180)}
	series, err := Build(rows, "clients")
	if err != nil || len(series) != 2 || series[1].Label != "scope=aggregate" || series[1].Points[1].X != 2 || series[1].Points[1].BandwidthMBs.Mean != 180 {
		t.Fatalf("%+v %v", series, err)
	}
	if _, err := Build(rows, "pattern"); !errors.Is(err, ErrX) {
		t.Fatalf("x = pattern: %v", err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", "", "clients", series); err != nil {
		t.Fatal(err)
	}
}

// Against offered load: rate is the default axis when the rows offer
// several loads, a closed loop's row (no rate) is left out, arrivals
// splits, and the latency is the response latency.
func TestAlongOfferedLoad(t *testing.T) {
	row := func(offered, arrivals string, bw, resp float64, saturated bool) results.Row {
		svc := resp / 10
		r := results.Row{Status: results.StatusOK, BandwidthMBs: &bw, LatP50Us: &svc, LatP99Us: &svc, RespP50Us: &resp, RespP99Us: &resp,
			Params: map[string]string{"block_size": "65536", "rate": offered, "arrivals": arrivals}}
		if offered != "" {
			r.Saturated = &saturated
		}
		return r
	}
	rows := []results.Row{
		row("100", "fixed", 100, 500, false), row("204.8", "fixed", 204.8, 900, false), row("400", "fixed", 300, 90000, true),
		row("100", "poisson", 100, 700, false), row("", "", 1000, 50, false),
	}
	if x := DefaultX(rows); x != "rate" {
		t.Fatalf("default x for rows offering 3 loads: %q, want rate", x)
	}
	if x := DefaultX(rows[3:]); x != "block_size" {
		t.Fatalf("default x for rows offering one load: %q, want block_size", x)
	}
	series, err := Build(rows, "rate")
	if err != nil || len(series) != 2 || series[0].Label != "arrivals=fixed" || series[1].Label != "arrivals=poisson" {
		t.Fatalf("%+v %v: want a series per arrivals, the closed loop's row left out", series, err)
	}
	pts := series[0].Points
	if len(pts) != 3 || pts[1].X != 204.8 || pts[2].RespP99Us.Mean != 90000 || pts[2].LatP99Us.Mean != 9000 || pts[2].Saturated != 1 || pts[0].Saturated != 0 {
		t.Fatalf("fixed: %+v", pts)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", "", "rate", series); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"offered load per client (MB/s)", "response latency from due time", "service p99"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

// TestBuildRate: -y end_to_end_mb_s draws that column in the left panel,
// named so, from the rows that have it (a peer's row, without one, is
// left out), and a column plot does not draw is refused.
func TestBuildRate(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	row := func(pipeline string, bs int, bw float64, e2e *float64) results.Row {
		return results.Row{Status: results.StatusOK, Params: map[string]string{"block_size": fmt.Sprint(bs), "pipeline": pipeline}, BandwidthMBs: &bw, EndToEndMBs: e2e}
	}
	rows := []results.Row{row("false", 4096, 100, f(40)), row("true", 4096, 100, f(70)), row("false", 65536, 100, f(50)), row("true", 65536, 100, f(90)), row("false", 65536, 300, nil)}
	series, err := BuildRate(rows, "block_size", "end_to_end_mb_s")
	if err != nil || len(series) != 2 || series[1].Label != "pipeline=true" || series[1].Rate != "end_to_end_mb_s" ||
		series[1].Points[1].BandwidthMBs.Mean != 90 || series[0].Points[1].N != 1 {
		t.Fatalf("BuildRate = %+v, %v; want two series of end_to_end_mb_s, the row without one left out", series, err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", "", "block_size", series); err != nil || !strings.Contains(buf.String(), "end to end (MB/s)") {
		t.Errorf("svg without the column's axis label (%v)", err)
	}
	// Any numeric column, latency too, with its unit.
	lat := func(r results.Row, v float64) results.Row { r.LatP50Us = &v; return r }
	series, err = BuildRate([]results.Row{lat(rows[0], 12), lat(rows[2], 30)}, "block_size", "lat_p50_us")
	buf.Reset()
	if err != nil || len(series) != 1 || series[0].Points[1].BandwidthMBs.Mean != 30 || Write(&buf, "svg", "", "block_size", series) != nil || !strings.Contains(buf.String(), "lat p50 (µs)") {
		t.Errorf("-y lat_p50_us: %+v, %v; want its figures under lat p50 (µs)", series, err)
	}
	if _, err := BuildRate(rows, "block_size", "lat_p5_us"); !errors.Is(err, ErrY) || !strings.Contains(err.Error(), "did you mean lat_p50_us?") {
		t.Errorf("-y lat_p5_us: %v, want ErrY with a did-you-mean", err)
	}
}

// TestLegendBelowThePanels: every series' legend entry is drawn under
// both panels' x-axis labels, so it can cover no point.
func TestLegendBelowThePanels(t *testing.T) {
	series := mustBuild(t, fixture(t))
	if len(series) < 2 {
		t.Fatalf("the fixture gives %d series; the test needs several", len(series))
	}
	var buf bytes.Buffer
	if err := Write(&buf, "svg", "", "block_size", series); err != nil {
		t.Fatal(err)
	}
	// Text is drawn flipped (scale(1, -1)): -y is its height from the bottom.
	text := regexp.MustCompile(`(?s)<text x="[^"]*" y="(-?[0-9.]+)"[^>]*>([^<]*)</text>`)
	height := map[string][]float64{}
	for _, m := range text.FindAllStringSubmatch(buf.String(), -1) {
		y, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		height[m[2]] = append(height[m[2]], -y)
	}
	axis := height["block size"]
	if len(axis) != 2 {
		t.Fatalf("%d x-axis labels, want one per panel", len(axis))
	}
	for _, s := range series {
		h := height[s.Label]
		if len(h) != 1 {
			t.Errorf("series %q: %d legend entries, want 1", s.Label, len(h))
			continue
		}
		if h[0] >= min(axis[0], axis[1]) {
			t.Errorf("series %q: legend at %.1f pt from the bottom, not under the axis labels at %.1f", s.Label, h[0], min(axis[0], axis[1]))
		}
	}
}
