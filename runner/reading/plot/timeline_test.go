package plot

import (
	"bytes"
	"errors"
	"image/color"
	"image/png"
	"path/filepath"
	"testing"

	"rdmasweep/results"
)

// stages is a four-region timeline, 100 ms a read and 50 a
// registration; overlapped, each registration runs while the next region
// is read, else each region is read only after the one before was
// registered.
func stages(overlapped bool) []results.RegionStages {
	var out []results.RegionStages
	at := 0.0
	for range 4 {
		start := at
		end := start + 100
		reg := end
		if overlapped {
			at = end // the next read starts at once
		} else {
			at = end + 50 // after this one's registration
		}
		out = append(out, results.RegionStages{PopulateStartMs: &start, PopulateEndMs: &end, RegisterStartMs: reg, RegisterEndMs: reg + 50, AnnouncedMs: reg + 51})
	}
	return out
}

// lanesTogether counts the pixel columns of a drawn timeline in which
// both the read lane and the registration lane are painted.
func lanesTogether(t *testing.T, b []byte) int {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	is := func(c color.Color, lane int) bool {
		for _, want := range laneColours[lane] {
			r, g, bl, _ := c.RGBA()
			wr, wg, wb, _ := want.RGBA()
			if r>>8 == wr>>8 && g>>8 == wg>>8 && bl>>8 == wb>>8 {
				return true
			}
		}
		return false
	}
	n := 0
	rc := img.Bounds()
	for x := rc.Min.X; x < rc.Max.X; x++ {
		read, reg := false, false
		for y := rc.Min.Y; y < rc.Max.Y; y++ {
			c := img.At(x, y)
			read = read || is(c, laneRead)
			reg = reg || is(c, laneReg)
		}
		if read && reg {
			n++
		}
	}
	return n
}

// A timeline whose registrations run while the next regions are read
// shows both lanes painted over the same stretch of time; one made
// serial shows none. Lanes drawn against anything but their own times
// fail one or the other.
func TestTimelineShowsOverlap(t *testing.T) {
	draw := func(overlapped bool) []byte {
		var b bytes.Buffer
		if err := WriteTimeline(&b, "png", []Timeline{{Title: "t", Regions: stages(overlapped)}}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	over, serial := lanesTogether(t, draw(true)), lanesTogether(t, draw(false))
	if over < 100 || serial > 0 {
		t.Fatalf("pixel columns with both lanes: overlapped %d, serial %d; want many, and none", over, serial)
	}
}

// Nothing to draw, too many panels, and a format that is neither PNG nor
// SVG are errors; an SVG is written whole.
func TestWriteTimelineFile(t *testing.T) {
	if err := WriteTimeline(&bytes.Buffer{}, "png", nil); !errors.Is(err, ErrNoData) {
		t.Fatalf("no timelines: %v", err)
	}
	many := make([]Timeline, MaxTimelines+1)
	if err := WriteTimeline(&bytes.Buffer{}, "png", many); err == nil {
		t.Fatalf("%d timelines drawn; want an error", len(many))
	}
	dir := t.TempDir()
	if err := WriteTimelineFile(filepath.Join(dir, "t.pdf"), []Timeline{{Regions: stages(true)}}); !errors.Is(err, ErrFormat) {
		t.Fatalf("a .pdf: %v", err)
	}
	if err := WriteTimelineFile(filepath.Join(dir, "t.svg"), []Timeline{{Regions: stages(true)}, {Regions: stages(false)}}); err != nil {
		t.Fatal(err)
	}
}
