package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteWholeOrNothing(t *testing.T) {
	for name, write := range map[string]func(string, os.FileMode, func(io.Writer) error) error{"Write": Write, "Replace": Replace} {
		t.Run(name, func(t *testing.T) { wholeOrNothing(t, write) })
	}
}

func wholeOrNothing(t *testing.T, Write func(string, os.FileMode, func(io.Writer) error) error) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := Write(path, 0o640, func(w io.Writer) error { _, err := io.WriteString(w, "first"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, 0o640, func(w io.Writer) error {
		io.WriteString(w, "half of the sec")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write with a failing writer = %v", err)
	}
	b, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	entries, _ := os.ReadDir(dir)
	if string(b) != "first" || st.Mode().Perm() != 0o640 || len(entries) != 1 {
		t.Fatalf("after a failed Write: %q, mode %v, %d entries; want the first file alone", b, st.Mode().Perm(), len(entries))
	}
}
