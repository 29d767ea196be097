package plot

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"rdmasweep/internal/atomicfile"
	"rdmasweep/results"
)

// Timeline is one pipelined server run's stages, as the timeline sidecar
// holds them, to draw in a panel of its own.
type Timeline struct {
	Title       string
	DiskIdlePct *float64
	Regions     []results.RegionStages
}

// The timeline's lanes, top to bottom.
const (
	laneRead = 2
	laneReg  = 1
	laneAnn  = 0
)

// MaxTimelines is the most panels one timeline chart holds.
const MaxTimelines = 8

// WriteTimelineFile draws tls into path (.png or .svg), one panel each,
// stacked; the file is written whole or not at all.
func WriteTimelineFile(path string, tls []Timeline) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if format != "png" && format != "svg" {
		return fmt.Errorf("%w %q: name the output .png or .svg", ErrFormat, filepath.Ext(path))
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return WriteTimeline(w, format, tls)
	})
}

// WriteTimeline draws each of tls (at most MaxTimelines) as a panel of
// three lanes against ms from the client's connection: each memory
// region's reads (first to last, populate parallel), its registration,
// and a tick where it was announced; neighbouring regions alternate in
// shade, so where a lane idles, and which stage runs behind the others,
// shows at a glance.
func WriteTimeline(w io.Writer, format string, tls []Timeline) error {
	if len(tls) == 0 {
		return ErrNoData
	}
	if len(tls) > MaxTimelines {
		return fmt.Errorf("%d timelines to draw; at most %d fit one chart", len(tls), MaxTimelines)
	}
	const panelH = 6 * vg.Centimeter
	h := panelH * vg.Length(len(tls))
	c, err := newCanvas(format, width, h)
	if err != nil {
		return err
	}
	tiles := draw.Tiles{Rows: len(tls), Cols: 1, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	dc := draw.New(c)
	for i, tl := range tls {
		p, err := timelinePanel(tl)
		if err != nil {
			return err
		}
		p.Draw(tiles.At(dc, 0, i))
	}
	_, err = c.WriteTo(w)
	return err
}

// The lanes' colours, two shades each for alternate regions.
var laneColours = map[int][2]color.Color{
	laneRead: {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0x9e, G: 0xc9, B: 0xe8, A: 0xff}},
	laneReg:  {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, color.RGBA{R: 0xf2, G: 0x9e, B: 0x9e, A: 0xff}},
	laneAnn:  {color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
}

func timelinePanel(tl Timeline) (*gplot.Plot, error) {
	p := gplot.New()
	p.Title.Text = tl.Title
	if tl.DiskIdlePct != nil {
		p.Title.Text += fmt.Sprintf(": disk idle %.1f %%", *tl.DiskIdlePct)
	}
	p.Title.Text += fmt.Sprintf(", %d regions", len(tl.Regions))
	p.X.Label.Text = "ms from the client's connection"
	p.Y.Min, p.Y.Max = -0.6, 2.6
	p.Y.Tick.Marker = gplot.ConstantTicks([]gplot.Tick{{Value: laneRead, Label: "read"}, {Value: laneReg, Label: "register"}, {Value: laneAnn, Label: "announced"}})
	p.X.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	bar := func(lane, i int, from, to float64) error {
		l, err := plotter.NewLine(plotter.XYs{{X: from, Y: float64(lane)}, {X: max(to, from), Y: float64(lane)}})
		if err != nil {
			return fmt.Errorf("region %d: %w", i, err)
		}
		l.Color, l.Width = laneColours[lane][i%2], vg.Points(14)
		p.Add(l)
		return nil
	}
	var ann plotter.XYs
	for i, r := range tl.Regions {
		if r.PopulateStartMs != nil && r.PopulateEndMs != nil {
			if err := bar(laneRead, i, *r.PopulateStartMs, *r.PopulateEndMs); err != nil {
				return nil, err
			}
		}
		if err := bar(laneReg, i, r.RegisterStartMs, r.RegisterEndMs); err != nil {
			return nil, err
		}
		ann = append(ann, plotter.XY{X: r.AnnouncedMs, Y: laneAnn})
	}
	sc, err := plotter.NewScatter(ann)
	if err != nil {
		return nil, fmt.Errorf("announcements: %w", err)
	}
	sc.Color, sc.Shape, sc.Radius = laneColours[laneAnn][0], draw.PlusGlyph{}, vg.Points(4)
	p.Add(sc)
	p.X.Min = 0
	return p, nil
}
