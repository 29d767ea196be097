package clitest

import (
	"strings"
	"testing"
)

// TableRow returns the cells of the row of a printed table that starts
// with first, split on runs of two or more spaces (cells hold single
// spaces).
func TableRow(t testing.TB, table, first string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, first+" ") {
			var cells []string
			for _, c := range strings.Split(line, "  ") {
				if c = strings.TrimSpace(c); c != "" {
					cells = append(cells, c)
				}
			}
			return cells
		}
	}
	t.Fatalf("no %s row in:\n%s", first, table)
	return nil
}

// Column returns the cell of row under the header name (the table's
// first line).
func Column(t testing.TB, table string, row []string, name string) string {
	t.Helper()
	head := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	for i, h := range head {
		if h == name {
			if i >= len(row) {
				t.Fatalf("row %q has no %s cell", row, name)
			}
			return row[i]
		}
	}
	t.Fatalf("no column %s in %q", name, head)
	return ""
}
