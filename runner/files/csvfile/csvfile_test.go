package csvfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
)

func okRow(key string, rep int) results.Row {
	bw, b := 123.5, int64(4096)
	v := true
	return results.Row{RunID: "r1", Plan: "p", PointKey: key, Repetition: rep, Status: results.StatusOK,
		Params: map[string]string{"transport": "tcp", "block_size": "4096"}, BandwidthMBs: &bw, Bytes: &b, Verified: &v}
}

func TestAppendReopenAndEmptyColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.csv")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append(okRow("k1", 1)); err != nil {
		t.Fatal(err)
	}
	failed := results.Row{RunID: "r1", PointKey: "k2", Repetition: 1, Status: results.StatusFailed, Error: "server:\nboom\n"}
	if err := c.Append(failed); err != nil {
		t.Fatal(err)
	}
	c.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != strings.Join(results.Columns, ",") {
		t.Fatalf("file:\n%s", data)
	}
	// A failed row has empty measurement columns and a one-line error.
	if !strings.Contains(lines[2], ",failed,server: boom,") || !strings.HasSuffix(lines[2], ",,,,,,,,,,,,,") {
		t.Fatalf("failed row %q", lines[2])
	}
	rows, err := Read(path)
	if err != nil || len(rows) != 2 || *rows[0].BandwidthMBs != 123.5 || rows[1].Bytes != nil {
		t.Fatalf("rows %+v err %v", rows, err)
	}
}

func TestPartialLastLineIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	c, _ := Open(path)
	c.Append(okRow("k1", 1))
	c.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("r1,p,k2,1,2026-") // a crash in mid-row
	f.Close()
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows()) != 1 {
		t.Fatalf("rows %d", len(c.Rows()))
	}
	c.Append(okRow("k3", 1))
	c.Close()
	rows, err := Read(path)
	if err != nil || len(rows) != 2 || rows[1].PointKey != "k3" {
		t.Fatalf("rows %+v err %v", rows, err)
	}
}

func TestForeignHeaderAndLock(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.csv")
	os.WriteFile(foreign, []byte("a,b,c\n1,2,3\n"), 0o644)
	if _, err := Open(foreign); !errors.Is(err, ErrForeignHeader) {
		t.Fatalf("foreign header: %v", err)
	}
	// A header with one extra column is foreign too, as is one cut short
	// before the first header's end, or with a column renamed.
	for name, header := range map[string][]string{
		"extra":   append(slices.Clone(results.Columns), "extra"),
		"short":   results.Columns[:results.FirstHeaderLen-1],
		"renamed": append([]string{"run"}, results.Columns[1:]...),
	} {
		path := filepath.Join(dir, name+".csv")
		os.WriteFile(path, []byte(strings.Join(header, ",")+"\n"), 0o644)
		if _, err := Open(path); !errors.Is(err, ErrForeignHeader) {
			t.Fatalf("%s header: OpenCSV gave %v, want ErrForeignHeader", name, err)
		}
		if _, err := Read(path); !errors.Is(err, ErrForeignHeader) {
			t.Fatalf("%s header: ReadCSV gave %v, want ErrForeignHeader", name, err)
		}
	}
	path := filepath.Join(dir, "out.csv")
	first, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// A write the kernel cuts short leaves part of the row in the file; Append
// must cut it back. RLIMIT_FSIZE makes the kernel write exactly up to the
// limit and fail the rest (EFBIG; Go ignores SIGXFSZ), which a full disk
// does only at a page boundary. The limit is per process, so the append
// runs in a child: this test binary again.
func TestShortWriteIsCutBack(t *testing.T) {
	const room = 37 // bytes of the row that fit
	if path := os.Getenv("RESULTS_SHORT_WRITE_CSV"); path != "" {
		c, err := Open(path)
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		st, _ := os.Stat(path)
		lim := unix.Rlimit{Cur: uint64(st.Size()) + room, Max: unix.RLIM_INFINITY}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(1)
		}
		fmt.Println(c.Append(okRow("k2", 1)))
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "out.csv")
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append(okRow("k1", 1)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	before, _ := os.ReadFile(path)

	cmd := exec.Command(os.Args[0], "-test.run=^TestShortWriteIsCutBack$")
	cmd.Env = append(os.Environ(), "RESULTS_SHORT_WRITE_CSV="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("(%d of ", room)) || !strings.Contains(string(out), "bytes reached the file, cut back): ") ||
		!strings.Contains(string(out), "file too large") {
		t.Fatalf("Append past RLIMIT_FSIZE said %q; want %d bytes reached the file, then cut back", out, room)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Fatalf("the file changed:\nbefore %q\nafter  %q", before, after)
	}
}

// TestReadsAndWritesV1Files holds compatibility with CSVs today's notebooks
// hold: files written by version 1 (by gocsv, which rdmasweep no longer
// uses) read back into rows that encode to exactly the same bytes.
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
		rows, err := Read(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		path := filepath.Join(t.TempDir(), "out.csv")
		c, err := Open(path)
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
				line = strings.Join(results.Columns, ",")
			} else if line != "" {
				line += strings.Repeat(",", len(results.Columns)-results.FirstHeaderLen)
			}
			if gotLines[i] != line {
				t.Fatalf("%s line %d re-encoded differs:\n got %s\nwant %s", file, i+1, gotLines[i], line)
			}
		}
	}
	rows, _ := Read("testdata/v1/mixed.csv")
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
	if _, err := Open(path); err != ErrOlderHeader {
		t.Fatalf("OpenCSV of an older header: %v", err)
	}
	before, _ := Read(path) // summary and plot read it as it is
	backup, err := Upgrade(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(backup); string(b) != string(old) {
		t.Fatalf("backup %s holds %q", backup, b)
	}
	c, err := Open(path)
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
