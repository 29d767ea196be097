package plot

import (
	"bytes"
	"errors"
	"image/png"
	"path/filepath"
	"testing"

	"rdmasweep/runner/reading/fleet"
)

// judged is a four-host pairwise judgment: every link at 1000 MB/s but
// those from server h2, at slowMBs; h4 unreachable when dead.
func judged(slowMBs float64, dead bool) []fleet.Point {
	var samples []fleet.Sample
	hosts := []string{"h1", "h2", "h3", "h4"}
	for _, s := range hosts {
		for _, c := range hosts {
			if s == c {
				continue
			}
			smp := fleet.Sample{Server: s, Client: c, MBs: 1000, OK: true}
			if s == "h2" {
				smp.MBs = slowMBs
			}
			if dead && (s == "h4" || c == "h4") {
				smp = fleet.Sample{Server: s, Client: c, Error: "client (h4): connect: connection refused"}
				if s == "h4" {
					smp.Error = "server (h4): connect: connection refused"
				}
			}
			samples = append(samples, smp)
		}
	}
	return []fleet.Point{{Judgment: fleet.Judge(samples, fleet.JudgeOptions{})}}
}

// colours counts the strongly red and strongly blue pixels of a PNG.
func colours(t *testing.T, b []byte) (red, blue int) {
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	r := img.Bounds()
	if r.Dx() < 400 || r.Dy() < 400 {
		t.Fatalf("PNG is %dx%d", r.Dx(), r.Dy())
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			switch {
			case cr > 0xc000 && cg < 0x8000 && cb < 0x8000:
				red++
			case cb > 0xc000 && cr < 0xd000 && cg < 0xd000:
				blue++
			}
		}
	}
	return red, blue
}

func TestMatrixColours(t *testing.T) {
	var slow, healthy bytes.Buffer
	if err := WriteMatrix(&slow, "png", "t", judged(250, false)); err != nil {
		t.Fatal(err)
	}
	if err := WriteMatrix(&healthy, "png", "t", judged(1000, false)); err != nil {
		t.Fatal(err)
	}
	sr, sb := colours(t, slow.Bytes())
	hr, hb := colours(t, healthy.Bytes())
	// The slow row is 3 of 12 links: red cells, a third as many as blue.
	if sr == 0 || sb == 0 || sr*2 > sb {
		t.Errorf("a slow server's row: %d red and %d blue pixels, want some red, more blue", sr, sb)
	}
	if hr != 0 || hb == 0 {
		t.Errorf("a healthy pool: %d red and %d blue pixels, want no red", hr, hb)
	}
}

func TestMatrixFiles(t *testing.T) {
	dir := t.TempDir()
	if err := WriteMatrixFile(filepath.Join(dir, "m.svg"), "pool", judged(250, true)); err != nil {
		t.Fatal(err)
	}
	if err := WriteMatrixFile(filepath.Join(dir, "m.pdf"), "pool", judged(250, true)); !errors.Is(err, ErrFormat) {
		t.Errorf("pdf: %v, want ErrFormat", err)
	}
	none := judged(250, false)
	for i := range none[0].Links {
		none[0].Links[i].OK = 0
	}
	if err := WriteMatrix(new(bytes.Buffer), "png", "", none); !errors.Is(err, ErrNoData) {
		t.Errorf("no link measured: %v, want ErrNoData", err)
	}
	var b bytes.Buffer
	if err := WriteMatrix(&b, "png", "", append(judged(250, false), judged(1000, true)...)); err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b.Bytes())); err != nil || cfg.Width < 2*cfg.Height-10 {
		t.Errorf("two points: %+v, %v; want two square panels side by side", cfg, err)
	}
}
