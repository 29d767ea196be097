package results

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func okRow(key string, rep int) Row {
	bw, b := 123.5, int64(4096)
	v := true
	return Row{RunID: "r1", Plan: "p", PointKey: key, Repetition: rep, Status: StatusOK,
		Params: map[string]string{"transport": "tcp", "block_size": "4096"}, BandwidthMBs: &bw, Bytes: &b, Verified: &v}
}

func TestAppendReopenAndEmptyColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.csv")
	c, err := OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Append(okRow("k1", 1)); err != nil {
		t.Fatal(err)
	}
	failed := Row{RunID: "r1", PointKey: "k2", Repetition: 1, Status: StatusFailed, Error: "server:\nboom\n"}
	if err := c.Append(failed); err != nil {
		t.Fatal(err)
	}
	c.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != strings.Join(Columns, ",") {
		t.Fatalf("file:\n%s", data)
	}
	// A failed row has empty measurement columns and a one-line error.
	if !strings.Contains(lines[2], ",failed,server: boom,") || !strings.HasSuffix(lines[2], ",,,,,,,,,,,,,") {
		t.Fatalf("failed row %q", lines[2])
	}
	rows, err := ReadCSV(path)
	if err != nil || len(rows) != 2 || *rows[0].BandwidthMBs != 123.5 || rows[1].Bytes != nil {
		t.Fatalf("rows %+v err %v", rows, err)
	}
}

func TestPartialLastLineIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	c, _ := OpenCSV(path)
	c.Append(okRow("k1", 1))
	c.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("r1,p,k2,1,2026-") // a crash in mid-row
	f.Close()
	c, err := OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows()) != 1 {
		t.Fatalf("rows %d", len(c.Rows()))
	}
	c.Append(okRow("k3", 1))
	c.Close()
	rows, err := ReadCSV(path)
	if err != nil || len(rows) != 2 || rows[1].PointKey != "k3" {
		t.Fatalf("rows %+v err %v", rows, err)
	}
}

func TestForeignHeaderAndLock(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.csv")
	os.WriteFile(foreign, []byte("a,b,c\n1,2,3\n"), 0o644)
	if _, err := OpenCSV(foreign); !errors.Is(err, ErrForeignHeader) {
		t.Fatalf("foreign header: %v", err)
	}
	// A header with one extra column is foreign too (gocsv alone would
	// accept it), as is one cut short before the first header's end, or
	// with a column renamed.
	for name, header := range map[string][]string{
		"extra":   append(slices.Clone(Columns), "extra"),
		"short":   Columns[:FirstHeaderLen-1],
		"renamed": append([]string{"run"}, Columns[1:]...),
	} {
		path := filepath.Join(dir, name+".csv")
		os.WriteFile(path, []byte(strings.Join(header, ",")+"\n"), 0o644)
		if _, err := OpenCSV(path); !errors.Is(err, ErrForeignHeader) {
			t.Fatalf("%s header: OpenCSV gave %v, want ErrForeignHeader", name, err)
		}
		if _, err := ReadCSV(path); !errors.Is(err, ErrForeignHeader) {
			t.Fatalf("%s header: ReadCSV gave %v, want ErrForeignHeader", name, err)
		}
	}
	path := filepath.Join(dir, "out.csv")
	first, err := OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := OpenCSV(path); !errors.Is(err, ErrLocked) {
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
		c, err := OpenCSV(path)
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
	c, err := OpenCSV(path)
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
