package results

import (
	"math"
	"testing"
)

// TestSetEndToEnd: the serial path's end-to-end time is the server's
// preparation before ready (populate, registration, prefetch) plus the
// client's time from its handshake to its last READ; a pipelined server
// prepares inside the client's time, so nothing is added. A result without
// READ times (not one pass of the file) leaves both cells empty.
func TestSetEndToEnd(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	res := &Result{Bytes: 8_000_000, FirstReadS: f(0.1), LastReadS: f(1.0)}
	for _, c := range []struct {
		name            string
		pipeline, io    string
		first, mbPerSec float64
	}{
		{"serial", "false", "mmap", (0.5 + 0.25 + 0.1) * 1e3, 8 / (0.5 + 0.25 + 1.0)},
		{"pipelined", "true", "mmap", 0.1 * 1e3, 8 / 1.0},
		// io direct: the ring's registration before ready counts; its
		// reads (populate_s) ran beside the READs.
		{"direct", "false", "direct", (0.25 + 0.1) * 1e3, 8 / (0.25 + 1.0)},
	} {
		r := Row{Params: map[string]string{"pipeline": c.pipeline, "io": c.io}, PopulateS: f(0.5), RegistrationS: f(0.25)}
		r.SetEndToEnd(res)
		if r.FirstReadMs == nil || r.EndToEndMBs == nil || math.Abs(*r.FirstReadMs-c.first) > 1e-9 || math.Abs(*r.EndToEndMBs-c.mbPerSec) > 1e-9 {
			t.Errorf("%s: first_read_ms %v, end_to_end_mb_s %v; want %v, %v", c.name, r.FirstReadMs, r.EndToEndMBs, c.first, c.mbPerSec)
		}
	}
	r := Row{Params: map[string]string{}, RegistrationS: f(0.25)}
	r.SetEndToEnd(&Result{Bytes: 1 << 20})
	if r.FirstReadMs != nil || r.EndToEndMBs != nil {
		t.Errorf("without READ times: first_read_ms %v, end_to_end_mb_s %v; want both empty", r.FirstReadMs, r.EndToEndMBs)
	}
}

// TestSetDonePipeline: a pipelined server's preparation, known only at its
// done event, fills the populate and registration cells.
func TestSetDonePipeline(t *testing.T) {
	s, mbs := 0.5, 32.0
	var r Row
	r.SetDone(&Done{Pipeline: &Pipeline{Regions: 4, Mapping: "shared-ro", RegistrationS: &s, RegistrationMBs: &mbs}})
	if r.Regions == nil || *r.Regions != 4 || r.RegistrationS == nil || *r.RegistrationS != s || r.Mapping != "shared-ro" || r.PopulateS != nil {
		t.Errorf("row after a pipelined done: regions %v, registration_s %v, mapping %q, populate_s %v", r.Regions, r.RegistrationS, r.Mapping, r.PopulateS)
	}
}
