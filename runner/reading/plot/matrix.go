package plot

// The heatmap of a pool sweep's links: clients across, servers down, each
// cell coloured by its median bandwidth over the median of all links, red
// below the slow threshold, white at it, blue at the median and above.

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"rdmasweep/internal/atomicfile"
	"rdmasweep/runner/reading/fleet"
)

// maxLabelled is the most hosts whose cells carry their figure; beyond
// it the text would not fit the cell.
const maxLabelled = 24

// WriteMatrixFile draws each point's matrix (see WriteMatrix) into path;
// its extension (.png or .svg) picks the format. The file is written whole
// or not at all.
func WriteMatrixFile(path, title string, points []fleet.Point) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "png" && format != "svg" {
		return fmt.Errorf("%w %q: name the output .png or .svg", ErrFormat, filepath.Ext(path))
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return WriteMatrix(w, format, title, points)
	})
}

// WriteMatrix draws each point's server × client matrix as a heatmap, side
// by side, as format ("png" or "svg") to w. A cell holds the link's median
// MB/s; the diagonal and links whose every row failed are grey, with an x
// for a failed one.
func WriteMatrix(w io.Writer, format, title string, points []fleet.Point) error {
	var measured bool
	for _, p := range points {
		for _, l := range p.Links {
			measured = measured || l.Measured()
		}
	}
	if !measured {
		return ErrNoData
	}
	var plots []*gplot.Plot
	hosts := 0
	for _, p := range points {
		t := title
		if p.Point != "" {
			t += " " + p.Point
		}
		pl, err := matrixPanel(strings.TrimSpace(t), p.Judgment)
		if err != nil {
			return err
		}
		plots = append(plots, pl)
		hosts = max(hosts, len(p.Hosts))
	}
	side := min(max(vg.Length(hosts)*1.4*vg.Centimeter+5*vg.Centimeter, 14*vg.Centimeter), 60*vg.Centimeter)
	wd, ht := side*vg.Length(len(plots)), side
	c, err := newCanvas(format, wd, ht)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadTop: 3 * vg.Millimeter, PadBottom: 3 * vg.Millimeter, PadLeft: 3 * vg.Millimeter, PadRight: 3 * vg.Millimeter}
	for i, pl := range plots {
		pl.Draw(tiles.At(dc, i, 0))
	}
	_, err = c.WriteTo(w)
	return err
}

// canvas is an image to draw on and write out.
type canvas interface {
	vg.CanvasSizer
	io.WriterTo
}

// newCanvas is a wd × ht canvas that writes format: "png" (at 120 dpi)
// or "svg".
func newCanvas(format string, wd, ht vg.Length) (canvas, error) {
	switch format {
	case "png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(wd, ht), vgimg.UseDPI(120))}, nil
	case "svg":
		return vgsvg.New(wd, ht), nil
	}
	return nil, fmt.Errorf("%w %q", ErrFormat, format)
}

// grid is a judgment's links as a GridXYZ: column c is client c, row r
// server r counted from the bottom, so the first server is the top row.
type grid struct {
	n     int
	ratio [][]float64 // [server][client]; NaN where there is no figure
}

func (g grid) Dims() (c, r int)   { return g.n, g.n }
func (g grid) Z(c, r int) float64 { return g.ratio[g.n-1-r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }
func newGrid(n int) grid          { return grid{n: n, ratio: nanMatrix(n)} }
func index(hosts []string) map[string]int {
	m := map[string]int{}
	for i, h := range hosts {
		m[h] = i
	}
	return m
}

func nanMatrix(n int) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
		for j := range m[i] {
			m[i][j] = math.NaN()
		}
	}
	return m
}

// matrixPanel is one point's heatmap, its cells labelled when they fit.
func matrixPanel(title string, j fleet.Judgment) (*gplot.Plot, error) {
	n, at := len(j.Hosts), index(j.Hosts)
	g := newGrid(n)
	labels := plotter.XYLabels{}
	for _, l := range j.Links {
		s, c := at[l.Server], at[l.Client]
		text := "x"
		if l.Measured() {
			g.ratio[s][c] = float64(l.Ratio)
			text = strconv.FormatFloat(float64(l.MBs), 'f', 0, 64)
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: float64(c), Y: float64(n - 1 - s)})
		labels.Labels = append(labels.Labels, text)
	}
	// Moreland's blue and red ends, red at the low end.
	red, blue := color.NRGBA{R: 180, G: 4, B: 38, A: 255}, color.NRGBA{R: 59, G: 76, B: 192, A: 255}
	cmap := moreland.NewSmoothDiverging(red, blue, 88)
	cmap.SetMin(0)
	cmap.SetMax(1.2)
	// White at the slow threshold: red cells are the slow links.
	if th := float64(j.Threshold) / float64(j.MedianMBs); th > 0 && th < 1.2 {
		cmap.SetConvergePoint(th)
	}
	hm := plotter.NewHeatMap(g, cmap.Palette(255))
	hm.Min, hm.Max = 0, 1.2
	hm.NaN = color.Gray{Y: 0xd0}
	hm.Underflow, hm.Overflow = hm.Palette.Colors()[0], hm.Palette.Colors()[254]

	p := gplot.New()
	p.Title.Text = title
	if p.Title.Text == "" {
		p.Title.Text = "links"
	}
	p.Title.Text += ": median MB/s of each link"
	p.X.Label.Text = fmt.Sprintf("client (reads)\nred: slow, below %.0f MB/s; blue: the median, %.0f MB/s", float64(j.Threshold), float64(j.MedianMBs))
	p.Y.Label.Text = "server"
	var xt, yt gplot.ConstantTicks
	for i, h := range j.Hosts {
		xt = append(xt, gplot.Tick{Value: float64(i), Label: h})
		yt = append(yt, gplot.Tick{Value: float64(n - 1 - i), Label: h})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = xt, yt
	p.Add(hm)
	if n <= maxLabelled {
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].XAlign, lb.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
		}
		p.Add(lb)
	}
	return p, nil
}
