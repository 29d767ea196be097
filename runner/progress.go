package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"rdmasweep/results"
	"rdmasweep/runner/point"
	"rdmasweep/runner/resume"
)

// progress shows the sweep on stderr: a bar with i/N, the point's
// parameters and the ETA when stderr is a terminal, otherwise one plain
// line per run, which logs and CI read better.
type progress struct {
	w     io.Writer
	n     int
	width int
	bar   *progressbar.ProgressBar
}

func newProgress(w io.Writer, n int) *progress {
	p := &progress{w: w, n: n, width: len(fmt.Sprint(n))}
	if stderrIsTerminal(w) {
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

func (p *progress) begin(i int, j resume.Job) {
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("[%d/%d] %s r%d", i+1, p.n, paramsText(j.Point), j.Rep))
	}
}

func (p *progress) end(i int, j resume.Job, row results.Row, tm point.Timing) {
	line := fmt.Sprintf("[%*d/%d] %s r%d: %s", p.width, i+1, p.n, paramsText(j.Point), j.Rep, rowText(row, tm))
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

// abort leaves the terminal clean when the sweep stops early.
func (p *progress) abort() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.w)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// stderrIsTerminal reports whether w is a terminal, for the progress bar.
func stderrIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
