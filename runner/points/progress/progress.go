// Package progress shows an exec's sweep on stderr, for people: a bar with
// i/N, the run's label and the ETA when stderr is a terminal, otherwise
// one plain line per run, which logs and CI read better.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"rdmasweep/results"
	"rdmasweep/runner/points/point"
)

// Bar is the progress of one sweep of n runs.
type Bar struct {
	w     io.Writer
	n     int
	width int
	bar   *progressbar.ProgressBar
}

// New shows n runs on w.
func New(w io.Writer, n int) *Bar {
	p := &Bar{w: w, n: n, width: len(fmt.Sprint(n))}
	if isTerminal(w) {
		p.bar = progressbar.NewOptions(n,
			progressbar.OptionSetWriter(w),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetWidth(20),
		)
	}
	return p
}

// Begin shows run i (from 0), labelled "block_size=4KiB r1", starting.
func (p *Bar) Begin(i int, label string) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("[%d/%d] %s", i+1, p.n, label))
	}
}

// End shows run i done, with the figures or the error of its last row.
func (p *Bar) End(i int, label string, row results.Row, tm point.Timing) {
	line := fmt.Sprintf("[%*d/%d] %s: %s", p.width, i+1, p.n, label, rowText(row, tm))
	if p.bar == nil {
		fmt.Fprintln(p.w, line)
		return
	}
	if row.Status != results.StatusOK {
		_ = p.bar.Clear()
		fmt.Fprintln(p.w, line)
	}
	_ = p.bar.Add(1)
}

func rowText(row results.Row, tm point.Timing) string {
	if row.Status != results.StatusOK {
		return "failed: " + row.Error
	}
	lat := "" // peers other than fio report no latency
	if row.LatP50Us != nil && row.LatP99Us != nil {
		lat = fmt.Sprintf(", p50 %.1f us, p99 %.1f us", *row.LatP50Us, *row.LatP99Us)
	}
	return fmt.Sprintf("ok %.1f MB/s%s (%.2f s)", *row.BandwidthMBs, lat, tm.Wall.Round(10*time.Millisecond).Seconds())
}

// Abort leaves the terminal clean when the sweep stops early.
func (p *Bar) Abort() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}

// Finish ends the bar.
func (p *Bar) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// isTerminal reports whether w is a terminal, for the bar.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
