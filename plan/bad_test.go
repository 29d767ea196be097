package plan

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata/bad/*.err, testdata/keys.golden) from the current output")

// badOptions reads a bad plan's header comments, which stand for the
// command line the plan is run with:
//
//	# set: name=value       (repeatable) Options.Set
//	# only: name=v1,v2      (repeatable) ExpandOptions.Only
//	# max-points: N         ExpandOptions.MaxPoints
//	# expand: yes           run Expand even without the above
func badOptions(t *testing.T, data []byte) (opts Options, eopts ExpandOptions, expand bool) {
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), ": ")
		if !strings.HasPrefix(line, "# ") || !ok {
			continue
		}
		switch k {
		case "set":
			opts.Set = append(opts.Set, v)
		case "only":
			eopts.Only, expand = append(eopts.Only, v), true
		case "max-points":
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bad max-points header: %v", err)
			}
			eopts.MaxPoints, expand = n, true
		case "expand":
			expand = true
		}
	}
	return opts, eopts, expand
}

// TestBadPlans loads every plan in testdata/bad and expects exactly the
// errors in the .err file beside it: every problem, each in compiler
// form, and nothing else.
func TestBadPlans(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("found %d bad plans, want at least 30", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			opts, eopts, expand := badOptions(t, data)
			p, err := Load(file, opts)
			if err == nil && expand {
				_, err = Expand(p, eopts)
			}
			if err == nil {
				t.Fatalf("%s loaded without error", file)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is %T, want a non-empty ErrorList: %v", err, err)
			}
			for _, e := range list {
				if e.Msg == "" || strings.Contains(e.Error(), "\n") {
					t.Errorf("error %q: want one non-empty line", e.Error())
				}
				if e.File != file && e.File != "--set" && e.File != "--only" {
					t.Errorf("error %q names file %q, want %q", e.Error(), e.File, file)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./plan -run TestBadPlans -update, then check the .err file by eye)", err)
			}
			if got != string(want) {
				t.Errorf("errors differ\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
