package sweep

import (
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// TestExecRecordsCalibrations: an rdma exec on hosts that runner check
// --calibrate compared records the latest calibration in its manifest,
// and warns, naming the size and how far, when node and ib_read_bw
// disagreed; one that agreed is recorded without a word.
func TestExecRecordsCalibrations(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "out.csv")
	p, err := plan.Parse("t.yaml", []byte(`name: t
hosts: {server: {address: local}, client: {address: local}}
transport: rdma
server: {file: /tmp/t.dat, file_size: 1MiB}
output: {csv: `+csv+`}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := &hostset.Set{Roles: []role.Target{{Role: "server", Host: remote.Local{}, Label: "server (local)"}, {Role: "client", Host: remote.Local{}, Label: "client (local)"}}}
	for _, c := range []struct {
		agree bool
		warn  string
	}{
		{true, ""},
		{false, "server (local) → client (local): runner check --calibrate at 2026-12-07T11:00:00Z found node and ib_read_bw disagree on these hosts (4KiB DISAGREE: node 12.0% slower)"},
	} {
		cal := manifest.Calibration{At: "2026-12-07T11:00:00Z", Server: "local", Client: "local", Agree: c.agree,
			Sizes: []manifest.CalibrationSize{{BlockSize: 4096, Ratio: 0.88, Agree: c.agree}, {BlockSize: 65536, Ratio: 1, Agree: true}}}
		if c.agree {
			cal.Sizes[0].Ratio = 1.01
		}
		if err := manifest.SaveCalibrations(manifest.CalibrationPathFor(csv), []manifest.Calibration{cal}); err != nil {
			t.Fatal(err)
		}
		var warned []string
		e := &Exec{Setup: Setup{Plan: p, CSVPath: filepath.Join(dir, "other.csv"), Warn: func(m string) { warned = append(warned, m) }}, Hosts: set}
		rec := &manifest.Record{M: &manifest.Manifest{}}
		e.recordCalibrations(rec)
		if len(rec.M.Calibrations) != 1 || rec.M.Calibrations[0].Agree != c.agree {
			t.Errorf("agree %v: manifest calibrations %+v, want the one kept beside the plan's CSV", c.agree, rec.M.Calibrations)
		}
		switch {
		case c.warn == "" && len(warned) > 0:
			t.Errorf("an agreeing calibration warned: %q", warned)
		case c.warn != "" && (len(warned) != 1 || !strings.HasPrefix(warned[0], c.warn)):
			t.Errorf("warned %q, want one starting %q", warned, c.warn)
		}
	}
}
