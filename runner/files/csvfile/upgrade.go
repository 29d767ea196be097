package csvfile

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
)

// Upgrade rewrites a CSV written by an older rdmasweep with today's
// header, leaving the columns it lacked empty. The rewrite is atomic, the
// old file is kept beside it (its path is returned), and the CSV's lock is
// held throughout, so a running exec is never rewritten under. A current
// header is left alone (backup ""); a foreign one is ErrForeignHeader.
func Upgrade(path string) (backup string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := lock(f); err != nil {
		return "", err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	switch _, current, older := headerOf(data); {
	case current:
		return "", nil
	case !older:
		return "", ErrForeignHeader
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1] // a crash's partial line is not a row
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return "", fmt.Errorf("parse rows: %w", err)
	}
	for backup = path + ".bak"; ; backup += "~" {
		if _, err := os.Lstat(backup); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err := os.Link(path, backup); err != nil {
		return "", fmt.Errorf("keep the old file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if err := outdir.Write(path, st.Mode().Perm(), func(w io.Writer) error { return writeRecords(w, records[1:]) }); err != nil {
		os.Remove(backup)
		return "", fmt.Errorf("rewrite: %w", err)
	}
	return backup, nil
}

// writeRecords writes today's header, then each record with the columns
// it lacks empty.
func writeRecords(w io.Writer, records [][]string) error {
	cols := results.Columns
	cw := csv.NewWriter(w)
	if err := cw.Write(cols); err != nil {
		return err
	}
	for _, rec := range records {
		if err := cw.Write(append(rec, make([]string, len(cols)-len(rec))...)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
