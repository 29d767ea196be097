package results

import (
	"bufio"
	"os"
	"path/filepath"
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

// TestReadsAndWritesV1Files holds compatibility with CSVs today's notebooks
// hold: files written by version 1 (gocsv) read back into rows that encode
// to exactly the same bytes.
func TestReadsAndWritesV1Files(t *testing.T) {
	files, _ := filepath.Glob("testdata/v1/*.csv")
	if len(files) == 0 {
		t.Fatal("no testdata/v1 files")
	}
	for _, file := range files {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ReadCSV(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		path := filepath.Join(t.TempDir(), "out.csv")
		c, err := OpenCSV(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if err := c.Append(r); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		// The same rows under today's header: each line as it was, and
		// the later columns empty.
		got, _ := os.ReadFile(path)
		gotLines := strings.Split(string(got), "\n")
		for i, line := range strings.Split(string(want), "\n") {
			if i == 0 {
				line = strings.Join(Columns, ",")
			} else if line != "" {
				line += strings.Repeat(",", len(Columns)-FirstHeaderLen)
			}
			if gotLines[i] != line {
				t.Fatalf("%s line %d re-encoded differs:\n got %s\nwant %s", file, i+1, gotLines[i], line)
			}
		}
	}
	rows, _ := ReadCSV("testdata/v1/mixed.csv")
	if rows[0].Transport() != "rdma" || rows[0].ParamInt("block_size") != 16<<20 || rows[0].Param("registration") != "pinned" ||
		*rows[0].RegistrationS != 6.55 || rows[1].Bytes != nil || rows[1].Param("pattern") != "random" {
		t.Fatalf("rows %+v", rows)
	}
}

// TestUpgrade rewrites an older header's file (version 1's, from a real
// run) with the current header, and exec's OpenCSV refuses the older file
// until then.
func TestUpgrade(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "old.csv")
	old, _ := os.ReadFile("testdata/v1/mixed.csv")
	if err := os.WriteFile(path, old, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCSV(path); err != ErrOlderHeader {
		t.Fatalf("OpenCSV of an older header: %v", err)
	}
	before, _ := ReadCSV(path) // summary and plot read it as it is
	backup, err := Upgrade(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backup); string(b) != string(old) {
		t.Fatalf("backup %s holds %q", backup, b)
	}
	c, err := OpenCSV(path)
	if err != nil {
		t.Fatalf("after upgrade: %v", err)
	}
	after := c.Rows()
	c.Close()
	if !reflect.DeepEqual(before, after) || len(after) != 2 {
		t.Fatalf("rows changed:\nbefore %+v\nafter  %+v", before, after)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	if again, err := Upgrade(path); err != nil || again != "" {
		t.Fatalf("second upgrade: %q %v", again, err)
	}
	// A second upgrade of another old copy keeps both backups.
	os.WriteFile(path, old, 0o640)
	if b2, err := Upgrade(path); err != nil || b2 == backup {
		t.Fatalf("second backup %q %v", b2, err)
	}
}
