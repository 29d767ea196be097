package results

import (
	"bufio"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestHeaderHistory holds the CSV contract: every header rdmasweep ever
// wrote (testdata/headers.txt, one per line, oldest first) is the start
// of today's, so columns are only ever appended. When a change appends a
// column, append today's header to the file; never edit a line of it.
func TestHeaderHistory(t *testing.T) {
	f, err := os.Open("testdata/headers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		h := strings.Split(sc.Text(), ",")
		if len(h) < len(last) || !slices.Equal(h[:len(last)], last) {
			t.Fatalf("header history: %v does not extend the one before it", h)
		}
		last = h
	}
	if len(last) < FirstHeaderLen {
		t.Fatalf("the first header has %d columns, FirstHeaderLen says %d", len(last), FirstHeaderLen)
	}
	if !slices.Equal(Columns[:min(len(last), len(Columns))], last) || len(Columns) != len(last) {
		t.Fatalf("Columns are not the last header in testdata/headers.txt (append it there when you add a column):\n got %v\nwant %v", Columns, last)
	}
}

// TestSchema checks the rules stated at the top of schema.go.
func TestSchema(t *testing.T) {
	rowTags := map[string]bool{}
	typ := reflect.TypeOf(Row{})
	for i := 0; i < typ.NumField(); i++ {
		if tag := typ.Field(i).Tag.Get("csv"); tag != "-" {
			rowTags[tag] = true
		}
	}
	seenCol, seenName := map[string]bool{}, map[string]bool{}
	for _, f := range schema {
		if f.Column != "" {
			if seenCol[f.Column] {
				t.Errorf("column %s twice", f.Column)
			}
			seenCol[f.Column] = true
			if f.Doc == "" {
				t.Errorf("column %s has no Doc", f.Column)
			}
		}
		p := f.Param
		if p == nil {
			if !rowTags[f.Column] {
				t.Errorf("column %s is neither a param nor a field of Row", f.Column)
			}
			delete(rowTags, f.Column)
			continue
		}
		if rowTags[f.Column] {
			t.Errorf("column %s is a param and a field of Row", f.Column)
		}
		if seenName[p.Name] {
			t.Errorf("param %s twice", p.Name)
		}
		seenName[p.Name] = true
		switch {
		case p.Sweep && f.Column == "":
			t.Errorf("param %s is sweepable but has no column", p.Name)
		case p.Since < 1:
			t.Errorf("param %s has no Since", p.Name)
		case p.Doc == "":
			t.Errorf("param %s has no Doc", p.Name)
		case p.Required && (p.Default != "" || p.Auto):
			t.Errorf("param %s is required and has a default", p.Name)
		case p.Kind == KindEnum && !slices.Contains(p.Enum, p.Default):
			t.Errorf("param %s: default %q is not one of %v", p.Name, p.Default, p.Enum)
		case p.Flag != "" && p.Role != "serve" && p.Role != "read" && p.Role != "both":
			t.Errorf("param %s: role %q", p.Name, p.Role)
		case p.PerHost && p.Section == "":
			t.Errorf("param %s is per host but top-level", p.Name)
		}
		for _, l := range p.Limits {
			if l.Why == "" || l.Max <= 0 || (p.Max > 0 && l.Max > p.Max) {
				t.Errorf("param %s: limit %+v", p.Name, l)
			}
		}
	}
	for tag := range rowTags {
		t.Errorf("Row field with csv tag %s is not a column of the schema", tag)
	}
}
