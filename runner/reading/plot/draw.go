package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"rdmasweep/internal/atomicfile"
	"rdmasweep/results"
)

// ErrFormat is returned for an output name that is neither .png nor .svg.
var ErrFormat = errors.New("unknown image format")

// ErrNoData is returned when there is no ok row to draw.
var ErrNoData = errors.New("no ok rows to plot")

// Size of the whole image, both panels side by side.
const (
	width  = 30 * vg.Centimeter
	height = 12 * vg.Centimeter
)

// WriteFile draws series along x (the parameter they were built along)
// into path; its extension (.png or .svg) picks the format. The file is
// written whole or not at all.
func WriteFile(path, title, x string, series []Series) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "png" && format != "svg" {
		return fmt.Errorf("%w %q: name the output .png or .svg", ErrFormat, filepath.Ext(path))
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return Write(w, format, title, x, series)
	})
}

// Write draws series as format ("png" or "svg") to w: bandwidth against x
// on the left, p50 (dashed) and p99 (solid) latency on the right, both on
// a log2 x axis, with ±1 sd error bars. Against an offered load (x a rate)
// the latency is the response latency, from each read's due time, with
// the service p99 dotted beside it, and saturated points are crossed.
func Write(w io.Writer, format, title, x string, series []Series) error {
	if len(series) == 0 {
		return ErrNoData
	}
	if title != "" {
		title += ": "
	}
	open := results.ParamByName(x).Kind == results.KindRate
	bwTitle, bwLabel := "bandwidth", "bandwidth (MB/s)"
	if y := series[0].Rate; y != "" && y != "bandwidth_mb_s" {
		bwTitle, bwLabel = y, yLabel(y)
	}
	bw, err := panel(title+bwTitle, x, bwLabel, false)
	if err != nil {
		return err
	}
	latTitle, latLabel := "latency per read", "µs (p99 solid, p50 dashed)"
	if open {
		latTitle, latLabel = "response latency from due time (p99 solid, p50 dashed; × saturated)", "µs (service p99, from post: dotted)"
	}
	lat, err := panel(latTitle, x, latLabel, true)
	if err != nil {
		return err
	}
	for i, s := range series {
		if err := addSeries(bw, lat, s, plotutil.Color(i), open); err != nil {
			return err
		}
	}
	bw.Y.Min = 0
	for _, p := range []*gplot.Plot{bw, lat} {
		widen(&p.X)
	}
	widen(&lat.Y)
	if math.IsInf(lat.Y.Min, 0) || lat.Y.Min <= 0 {
		// No series had a latency (a peer that reports none): an empty
		// panel, with an axis a log scale can draw.
		lat.Y.Min, lat.Y.Max = 1, 10
		lat.X.Min, lat.X.Max = bw.X.Min, bw.X.Max
		lat.Title.Text += " (none reported)"
	}

	// The legend goes under the panels, in a strip of its own, so it
	// never covers a point.
	leg := bw.Legend
	bw.Legend = gplot.NewLegend()
	strip := legendHeight(&leg)
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "png":
		img := vgimg.NewWith(vgimg.UseWH(width, height+strip), vgimg.UseDPI(120))
		c = vgimg.PngCanvas{Canvas: img}
	case "svg":
		c = vgsvg.New(width, height+strip)
	default:
		return fmt.Errorf("%w %q", ErrFormat, format)
	}
	dc := draw.New(c)
	panels := draw.Crop(dc, 0, 0, strip, 0)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	// Each panel lays itself out in its own tile: same title and x axis,
	// so titles and data areas line up. (gplot.Align shifts whole canvases
	// to align data areas, and the titles then sit at different heights.)
	bw.Draw(tiles.At(panels, 0, 0))
	lat.Draw(tiles.At(panels, 1, 0))
	leg.Top, leg.Left = true, true
	leg.Draw(draw.Crop(dc, vg.Centimeter, 0, vg.Millimeter*2, -height-vg.Millimeter))
	_, err = c.WriteTo(w)
	return err
}

// legendHeight is the height of the strip under the panels that holds
// leg, one entry a line.
func legendHeight(leg *gplot.Legend) vg.Length {
	r := leg.Rectangle(draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: width, Y: height}}})
	return r.Max.Y - r.Min.Y + vg.Millimeter*4
}

// yLabel is the left panel's axis label for column y: its name, with its
// unit where the name says one.
func yLabel(y string) string {
	// Longest suffix first: _mb_s before _s.
	for _, u := range [][2]string{{"_mb_s", "MB/s"}, {"_bytes", "bytes"}, {"_pct", "%"}, {"_us", "µs"}, {"_ms", "ms"}, {"_s", "s"}} {
		if name, ok := strings.CutSuffix(y, u[0]); ok {
			return strings.ReplaceAll(name, "_", " ") + " (" + u[1] + ")"
		}
	}
	return strings.ReplaceAll(y, "_", " ")
}

// addSeries draws s in both panels: its bandwidth, and its latency, the
// response latency of an open loop (open) with its saturated points
// crossed.
func addSeries(bw, lat *gplot.Plot, s Series, col color.Color, open bool) error {
	dashed, dotted := []vg.Length{vg.Points(4), vg.Points(3)}, []vg.Length{vg.Points(1), vg.Points(2)}
	if err := addLine(bw, s, col, nil, func(p Point) Stat { return p.BandwidthMBs }, s.Label); err != nil {
		return err
	}
	p50, p99 := func(p Point) Stat { return p.LatP50Us }, func(p Point) Stat { return p.LatP99Us }
	if open {
		if err := addLine(lat, s, col, dotted, p99, ""); err != nil {
			return err
		}
		p50, p99 = func(p Point) Stat { return p.RespP50Us }, func(p Point) Stat { return p.RespP99Us }
	}
	if err := addLine(lat, s, col, dashed, p50, ""); err != nil {
		return err
	}
	if err := addLine(lat, s, col, nil, p99, ""); err != nil {
		return err
	}
	return addSaturated(lat, s, col, p99)
}

// addSaturated crosses the points of s where a run was saturated, at y.
func addSaturated(p *gplot.Plot, s Series, col color.Color, y func(Point) Stat) error {
	var xys plotter.XYs
	for _, pt := range s.Points {
		if st := y(pt); pt.Saturated > 0 && !math.IsNaN(st.Mean) {
			xys = append(xys, plotter.XY{X: pt.X, Y: st.Mean})
		}
	}
	if len(xys) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return fmt.Errorf("series %s: %w", s.Label, err)
	}
	sc.Color, sc.Shape, sc.Radius = col, draw.CrossGlyph{}, vg.Points(6)
	p.Add(sc)
	return nil
}

func panel(title, x, ylabel string, logY bool) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = strings.ReplaceAll(x, "_", " ")
	if results.ParamByName(x).Kind == results.KindRate {
		p.X.Label.Text = "offered load per client (MB/s)"
	}
	p.Y.Label.Text = ylabel
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = pow2Ticks{sizes: results.ParamByName(x).Kind == results.KindSize}
	p.Y.Tick.Marker = plainTicks{}
	if logY {
		p.Y.Scale = gplot.LogScale{}
		p.Y.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// widen gives a log axis holding one value a range around it; an empty
// range cannot be drawn on a log scale.
func widen(a *gplot.Axis) {
	if a.Min == a.Max && a.Min > 0 {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}

// errXY is one series' points with their error bars.
type errXY struct {
	plotter.XYs
	plotter.YErrors
}

func addLine(p *gplot.Plot, s Series, col color.Color, dashes []vg.Length, get func(Point) Stat, legend string) error {
	var d errXY
	for _, pt := range s.Points {
		st := get(pt)
		if math.IsNaN(st.Mean) {
			continue
		}
		low := st.SD
		// A log axis cannot show an error bar reaching 0 or below.
		if _, isLog := p.Y.Scale.(gplot.LogScale); isLog && st.Mean-low <= 0 {
			low = st.Mean * 0.999
		}
		d.XYs = append(d.XYs, plotter.XY{X: pt.X, Y: st.Mean})
		d.YErrors = append(d.YErrors, struct{ Low, High float64 }{low, st.SD})
	}
	if len(d.XYs) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(d.XYs)
	if err != nil {
		return fmt.Errorf("series %s: %w", s.Label, err)
	}
	line.Color = col
	line.Dashes = dashes
	points.Color = col
	points.Shape = draw.CircleGlyph{}
	bars, err := plotter.NewYErrorBars(d)
	if err != nil {
		return fmt.Errorf("series %s: %w", s.Label, err)
	}
	bars.Color = col
	p.Add(line, points, bars)
	if legend != "" {
		p.Legend.Add(legend, line, points)
	}
	return nil
}

// plainTicks labels a linear axis every 1, 2 or 5 × 10^k, whichever
// gives 4 to 7 labels, with an unlabelled tick halfway between, and no
// trailing zeros ("2500", not "2500.00"). gonum's default ticks can leave
// an axis with two labels.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []gplot.Tick {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return gplot.DefaultTicks{}.Ticks(lo, hi)
	}
	mag := math.Pow(10, math.Floor(math.Log10(span)))
	step := mag
	for _, m := range []float64{0.1, 0.2, 0.5, 1, 2, 5} {
		if span/(m*mag) <= 7 {
			step = m * mag
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	var ticks []gplot.Tick
	for i := math.Ceil(lo / step * 2); i <= math.Floor(hi/step*2); i++ {
		v := i * step / 2
		t := gplot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			t.Label = strconv.FormatFloat(v, 'f', decimals, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// pow2Ticks labels every power of two on a log2 x axis, thinned to at most
// about eight labels, in binary units for sizes.
type pow2Ticks struct{ sizes bool }

func (pt pow2Ticks) Ticks(min, max float64) []gplot.Tick {
	if !(min > 0) || math.IsInf(max, 0) {
		return nil // no range a log axis can draw
	}
	lo := int(math.Floor(math.Log2(min)))
	hi := int(math.Ceil(math.Log2(max)))
	step := 1
	for (hi-lo)/step > 8 {
		step++
	}
	var ticks []gplot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(float64(e))
		if v < min*(1-1e-9) || v > max*(1+1e-9) {
			continue
		}
		t := gplot.Tick{Value: v}
		if (e-lo)%step == 0 {
			t.Label = strconv.FormatInt(int64(v), 10)
			if pt.sizes {
				t.Label = results.FormatSize(int64(v))
			}
		}
		ticks = append(ticks, t)
	}
	return ticks
}
