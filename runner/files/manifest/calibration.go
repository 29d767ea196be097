package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"rdmasweep/runner/files/outdir"
)

// Calibration is runner check --calibrate's comparison of node with
// ib_read_bw between one server and one client, on the plan's device
// and GID: node/ib_read_bw per block size, from pairs of runs taken in
// turns. Agree is every size's.
type Calibration struct {
	At     string `json:"at"` // RFC 3339 UTC
	Server string `json:"server"`
	Client string `json:"client"` // as the CSV's server_host and client_host name them
	// Node is the SHA-256 of the node that ran, the same on both hosts'
	// architectures' builds as deployed.
	Node      string            `json:"node_sha256"`
	Tolerance float64           `json:"tolerance"` // 0.03: within 3 % is agreement
	Sizes     []CalibrationSize `json:"sizes"`
	Agree     bool              `json:"agree"`
}

// CalibrationSize is one block size's pairs and their median ratio.
type CalibrationSize struct {
	BlockSize int64     `json:"block_size"`
	NodeMBs   []float64 `json:"node_mb_s"`
	PeerMBs   []float64 `json:"ib_read_bw_mb_s"`
	// Ratio is the median of the pairs' node/ib_read_bw; 0 when no pair
	// ran whole, with Error saying why.
	Ratio float64 `json:"ratio"`
	Agree bool    `json:"agree"`
	Error string  `json:"error,omitempty"`
}

// CalibrationPathFor is where check --calibrate keeps its calibrations
// of a plan's hosts: beside the plan's CSV, which exec reads them from.
func CalibrationPathFor(csvPath string) string {
	return filepath.Join(filepath.Dir(csvPath), filepath.Base(csvPath)+".calibration.json")
}

// ReadCalibrations reads the calibrations at path: none when there is no
// file.
func ReadCalibrations(path string) ([]Calibration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read calibrations: %w", err)
	}
	var cs []Calibration
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("read calibrations %s: %w", path, err)
	}
	return cs, nil
}

// SaveCalibrations replaces, at path, each pair's calibration with the
// one in cs, keeping the other pairs', and writes the file whole (a
// temporary file renamed over it), never through a symlink.
func SaveCalibrations(path string, cs []Calibration) error {
	old, err := ReadCalibrations(path)
	if err != nil {
		return err
	}
	keep := cs
	for _, o := range old {
		if LatestCalibration(cs, o.Server, o.Client) == nil {
			keep = append(keep, o)
		}
	}
	b, err := json.MarshalIndent(keep, "", "  ")
	if err != nil {
		return err
	}
	d, err := outdir.Make(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("save calibrations: %w", err)
	}
	defer d.Close()
	if err := d.Write(filepath.Base(path), 0o644, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
		return fmt.Errorf("save calibrations: %w", err)
	}
	return nil
}

// LatestCalibration is the last of cs between server and client, or nil.
func LatestCalibration(cs []Calibration, server, client string) *Calibration {
	var last *Calibration
	for i := range cs {
		if cs[i].Server == server && cs[i].Client == client && (last == nil || cs[i].At >= last.At) {
			last = &cs[i]
		}
	}
	return last
}
