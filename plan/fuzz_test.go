package plan

import (
	"rdmasweep/results"
	"rdmasweep/results/param"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader and expander. Whatever the
// input, Parse and ParseExpanded must not panic and must either return a plan or an
// ErrorList of one-line errors inside the file; a plan it accepts must
// expand into points that satisfy the rules Load promises, with keys that
// are stable and distinct. The committed corpus (testdata/fuzz/FuzzLoad)
// holds every checked-in and testdata plan; go test runs it as a test.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		// Expanded on what loaded, errors and all (validate's way), a plan
		// must not panic either, and its errors stay inside the file.
		if xp, pts, err := ParseExpanded("f.yaml", data, Options{}, ExpandOptions{MaxPoints: 2000}); err != nil {
			checkErrorList(t, err, data)
		} else if xp == nil || len(pts) == 0 {
			t.Fatalf("ParseExpanded: plan %v, %d points, and no error", xp != nil, len(pts))
		}
		p, err := Parse("f.yaml", data, Options{})
		if (p == nil) == (err == nil) {
			t.Fatalf("Parse returned plan %v and error %v: want exactly one", p != nil, err)
		}
		if err != nil {
			checkErrorList(t, err, data)
			return
		}
		pts, err := Expand(p, ExpandOptions{MaxPoints: 2000})
		if err != nil {
			checkErrorList(t, err, data)
			return
		}
		if len(pts) == 0 {
			t.Fatal("a valid plan expanded to no points")
		}
		keys := map[string]bool{}
		for i, pt := range pts {
			if pt.Index != i || len(pt.Key) != 16 || keys[pt.Key] {
				t.Fatalf("point %d: index %d, key %q (duplicate: %v)", i, pt.Index, pt.Key, keys[pt.Key])
			}
			keys[pt.Key] = true
			v := pt.Values
			bs, fs := v.Int(param.BlockSize), v.Int(param.FileSize)
			if bs <= 0 || fs < bs || fs%bs != 0 {
				t.Fatalf("point %d: block_size %d, file_size %d accepted", i, bs, fs)
			}
			if total, dur := v.Int(param.Total), v.Duration(param.Duration); total < 0 || dur < 0 || v.Duration(param.Warmup) < 0 || (total != 0 && dur != 0) {
				t.Fatalf("point %d: total %d, duration %v, warmup %v accepted", i, total, dur, v.Duration(param.Warmup))
			}
			for _, prm := range results.Params() {
				max, _, limited := prm.LimitFor(pt.Transport())
				if n := v.Int(prm.ID()); (prm.Kind == results.KindSize || prm.Kind == results.KindInt) && !(prm.Auto && n == -1) &&
					(n < prm.Min || limited && n > max) {
					t.Fatalf("point %d: %s %d accepted, outside %d..%d for %s", i, prm.Name, n, prm.Min, max, pt.Transport())
				}
				if prm.Kind == results.KindEnum && !slices.Contains(prm.Enum, v.Str(prm.ID())) {
					t.Fatalf("point %d: %s %q accepted", i, prm.Name, v.Str(prm.ID()))
				}
			}
			if !strings.HasPrefix(v.Str(param.File), "/") {
				t.Fatalf("point %d: file %q accepted", i, v.Str(param.File))
			}
		}
		if p.Timeouts.Ready >= p.Timeouts.Point || p.Repeat < 1 || !nameRe.MatchString(p.Name) || !strings.HasPrefix(p.Node.RemotePath, "/") {
			t.Fatalf("invalid plan accepted: %+v", p)
		}
		// The same bytes give the same keys.
		p2, err := Parse("f.yaml", data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		pts2, err := Expand(p2, ExpandOptions{MaxPoints: 2000})
		if err != nil || len(pts2) != len(pts) {
			t.Fatalf("second expansion: %d points, %v", len(pts2), err)
		}
		for i := range pts {
			if pts[i].Key != pts2[i].Key {
				t.Fatalf("point %d: key %s then %s", i, pts[i].Key, pts2[i].Key)
			}
		}
	})
}

func checkErrorList(t *testing.T, err error, data []byte) {
	t.Helper()
	var list ErrorList
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %T %v: want a non-empty ErrorList", err, err)
	}
	lines := lineCount(data)
	for i, e := range list {
		if e.Msg == "" || strings.ContainsAny(e.Error(), "\n\r") {
			t.Fatalf("error %q: want one non-empty line", e.Error())
		}
		if e.File != "f.yaml" || e.Line < 0 || e.Line > lines || e.Col < 0 || (e.Line == 0 && e.Col != 0) {
			t.Fatalf("error %q: position %s:%d:%d outside the %d-line file", e.Error(), e.File, e.Line, e.Col, lines)
		}
		if i > 0 && (list[i-1].Line > e.Line || (list[i-1].Line == e.Line && list[i-1].Col > e.Col)) {
			t.Fatalf("errors not sorted:\n%v", err)
		}
	}
}

// TestFuzzCorpus checks that every checked-in and testdata plan seeds
// FuzzLoad, so new plans widen the fuzzing; -update writes the seeds.
func TestFuzzCorpus(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../plans/*.yaml", "testdata/good/*.yaml", "testdata/bad/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Base(filepath.Dir(file))
		seed := filepath.Join("testdata/fuzz/FuzzLoad", dir+"-"+strings.TrimSuffix(filepath.Base(file), ".yaml"))
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if *update {
			if err := os.MkdirAll(filepath.Dir(seed), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(seed, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(seed)
		if err != nil || string(got) != want {
			t.Errorf("%s is not seeded from %s (go test ./plan -run TestFuzzCorpus -update)", seed, file)
		}
	}
}
