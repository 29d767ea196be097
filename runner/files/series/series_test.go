package series

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// TestLinesFromManyRoles: intervals added at once by several roles each
// become one whole JSON line naming its point, repetition and role, and
// the file is only created by the first.
func TestLinesFromManyRoles(t *testing.T) {
	dir := t.TempDir()
	path := PathFor(filepath.Join(dir, "out.csv"), "RUN")
	if path != filepath.Join(dir, "RUN.series.jsonl") {
		t.Fatalf("PathFor: %s", path)
	}
	s := New(path)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("created before the first line: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := role.Target{Role: "client", Host: remote.Local{}}
			s.Add(plan.Point{Key: "k"}, i+1, tg, &results.Interval{Bytes: int64(i)})
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reps := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			PointKey   string `json:"point_key"`
			Repetition int    `json:"repetition"`
			Role, Host string
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.PointKey != "k" || l.Role != "client" || l.Host != "local" {
			t.Fatalf("line %q: %+v %v", sc.Text(), l, err)
		}
		reps[l.Repetition] = true
	}
	if len(reps) != 8 {
		t.Fatalf("%d distinct lines, want 8", len(reps))
	}
}

// TestFailureIsKeptForClose: a series that cannot be written does not
// stop the run; Close says why.
func TestFailureIsKeptForClose(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "no such dir", "x.series.jsonl"))
	s.Add(plan.Point{Key: "k"}, 1, role.Target{Role: "client", Host: remote.Local{}}, &results.Interval{})
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "x.series.jsonl") {
		t.Fatalf("close: %v", err)
	}
}
