package sweep

import (
	"errors"
	"fmt"
	"os"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/hint"
)

// OpenCSV opens the CSV at path for an exec to append to, with what to do
// when it cannot: another exec holds it, or an older version wrote it.
func OpenCSV(path string) (*csvfile.File, error) {
	csv, err := csvfile.Open(path)
	switch {
	case errors.Is(err, csvfile.ErrLocked):
		return nil, hint.Wrap(fmt.Errorf("%s: %w", path, err), "wait for it to finish, or pass another --out")
	case errors.Is(err, csvfile.ErrOlderHeader):
		return nil, hint.Wrap(fmt.Errorf("%s: %w", path, err), "add the new columns with: runner csv upgrade "+path+" (it keeps the old file as a backup), or pass another --out")
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return csv, nil
}

// Existing are the rows of the CSV at path, or none when there is no such
// file: what a dry run sees without locking or creating it.
func Existing(path string) ([]results.Row, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	rows, err := csvfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return rows, nil
}
