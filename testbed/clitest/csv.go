package clitest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
)

// ReadRows reads a results CSV.
func ReadRows(t testing.TB, path string) []results.Row {
	t.Helper()
	rows, err := csvfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// WholeCSV reads the CSV as a user's script would, and fails the test
// unless its header is intact and every line is a whole row.
func WholeCSV(t testing.TB, path string) []results.Row {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s ends in a partial line:\n%s", path, data)
	}
	if !bytes.HasPrefix(data, []byte(strings.Join(results.Columns, ",")+"\n")) {
		t.Fatalf("%s lost its header:\n%s", path, data)
	}
	rows, err := csvfile.Read(path)
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	if lines := bytes.Count(data, []byte("\n")); lines != len(rows)+1 {
		t.Fatalf("%s: %d lines for %d rows", path, lines, len(rows))
	}
	return rows
}

// WaitRows waits until the CSV p appends to holds n rows.
func (p *Proc) WaitRows(t testing.TB, csv string, n int) {
	t.Helper()
	p.Until(t, fmt.Sprintf("%d rows in %s", n, csv), 60*time.Second, func() bool {
		rows, err := csvfile.Read(csv)
		return err == nil && len(rows) >= n
	})
}
