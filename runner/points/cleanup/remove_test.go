package cleanup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"rdmasweep/runner/files/csvfile"
)

func TestLockCSVAndState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	if csv, err := LockCSV(path); csv != nil || err != nil {
		t.Fatalf("LockCSV of no file = %v, %v; want nothing", csv, err)
	}
	if _, ok := State(path); ok {
		t.Fatal("State found a record that does not exist")
	}
	exec, err := csvfile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockCSV(path); !errors.Is(err, csvfile.ErrLocked) {
		t.Fatalf("LockCSV while an exec holds the CSV = %v, want ErrLocked", err)
	}
	exec.Close()
	csv, err := LockCSV(path)
	if err != nil || csv == nil {
		t.Fatalf("LockCSV of an idle CSV = %v, %v", csv, err)
	}
	csv.Close()
	if err := os.WriteFile(StatePath(path), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, ok := State(path)
	if !ok || r.Path != StatePath(path) || r.What != Leftovers || r.Size != 3 || r.Target.Label != "local" {
		t.Fatalf("State = %+v, %v", r, ok)
	}
}
