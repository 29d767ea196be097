package csvfile

import (
	"fmt"

	"rdmasweep/results"
)

// ReadRun reads the results file at path as Read does, keeping only the
// rows of run runID, or every row when runID is empty.
func ReadRun(path, runID string) ([]results.Row, error) {
	rows, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if runID == "" {
		return rows, nil
	}
	var kept []results.Row
	for _, r := range rows {
		if r.RunID == runID {
			kept = append(kept, r)
		}
	}
	return kept, nil
}
