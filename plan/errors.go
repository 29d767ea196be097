package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem with a plan, in compiler form:
//
//	plans/x.yaml:14:7: sweep.zip.block_size.to: must be a size like 4KiB (got "4kb") (did you mean 4KiB?)
//
// File is the plan's name as given to Load or Parse. Problems that come
// from the command line rather than the file use File "--set" or "--only"
// and Path is the name as the user typed it; they have no position (Line
// and Col are 0). Line is also 0 when nothing in the file can be pointed
// at, and Col is 0 when the YAML parser reports only a line.
type Error struct {
	File      string
	Line, Col int
	Path      string // dotted field path, "" for whole-file problems
	Msg       string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	// Keys and values come from the plan; one problem must stay one line.
	return lineBreaks.Replace(b.String())
}

var lineBreaks = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// ErrorList is every problem found in a plan, sorted by file, line and
// column. Its Error is one line per problem.
type ErrorList []*Error

func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sorted returns l sorted and without exact duplicates, or nil when empty,
// so callers can return it as an error only when there is one.
func (l ErrorList) sorted() error {
	if len(l) == 0 {
		return nil
	}
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	l = slices.CompactFunc(l, func(a, b *Error) bool { return *a == *b })
	return l
}
