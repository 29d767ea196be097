package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

// The notebook examples/sweep.ipynb, executed the way CI does it: on a CSV
// this test makes with a real exec (node beside iperf3 and fio), with
// jupyter nbconvert --execute. Before it, pandas reads that CSV and the
// checked-in sample beside the notebook, and every numeric column must
// come out numeric: no units or "1MiB" in numbers, empty cells as NaN.

// notebookPython is the python3 that has pandas and matplotlib (Debian's
// python3-pandas, python3-matplotlib), or "" with the reason.
func notebookPython() (string, string) {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import pandas, matplotlib, ipykernel").Run() == nil {
			return py, ""
		}
	}
	return "", "no python3 with pandas, matplotlib and ipykernel (apt-get install python3-pandas python3-matplotlib python3-ipykernel)"
}

// numericColumns are the CSV's columns that hold numbers: parameters
// recorded as sizes, integers and durations, and Row's number fields.
func numericColumns() []string {
	rowKinds := map[string]reflect.Kind{}
	typ := reflect.TypeOf(results.Row{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		k := f.Type.Kind()
		if k == reflect.Pointer {
			k = f.Type.Elem().Kind()
		}
		rowKinds[f.Tag.Get("csv")] = k
	}
	var cols []string
	for _, c := range results.Columns {
		if p := results.ColumnParam(c); p != nil {
			if p.Kind == results.KindSize || p.Kind == results.KindInt || p.Kind == results.KindDuration {
				cols = append(cols, c)
			}
			continue
		}
		switch rowKinds[c] {
		case reflect.Int, reflect.Int64, reflect.Float64:
			cols = append(cols, c)
		}
	}
	return cols
}

// pandasCheck reads csv with pandas and fails on a numeric column that is
// not numeric; it also asserts that the given columns hold NaN somewhere
// (cells the row does not have).
const pandasCheck = `import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
numeric, nan, current = json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4] == "current"
bad = [f"{c} ({df[c].dtype}: {df[c].dropna().head(3).tolist()})" for c in numeric if c in df and not pd.api.types.is_numeric_dtype(df[c])]
missing = [c for c in numeric if c not in df and current]  # an older header lacks the later columns
nonan = [c for c in nan if not df[c].isna().any()]
if bad or missing or nonan:
    sys.exit(f"not numeric: {bad}; missing: {missing}; no NaN in: {nonan}")
print(len(df), "rows,", len([c for c in numeric if c in df]), "numeric columns")
`

// needNotebook skips (or fails under CI) unless jupyter nbconvert and a
// python3 with the notebook's modules run, and returns both.
func needNotebook(t *testing.T) (jupyter, py string) {
	t.Helper()
	jupyter = testenv.NeedTool(t, "jupyter", "jupyter-nbconvert")
	py, why := notebookPython()
	if py == "" {
		testenv.Skip(t, why)
	}
	if err := exec.Command(jupyter, "nbconvert", "--version").Run(); err != nil {
		testenv.Skip(t, "jupyter nbconvert does not run (apt-get install jupyter-nbconvert): "+err.Error())
	}
	return jupyter, py
}

func TestNotebookRunsOnACSVFromTheTests(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "fio", "fio")
	testenv.NeedTool(t, "ss", "iproute2")
	jupyter, py := needNotebook(t)

	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	planText, _ := os.ReadFile(plan)
	s := strings.Replace(string(planText), "client: {queue_depth: 4, verify: true}", "client: {queue_depth: 4, total: 16MiB}", 1)
	s = strings.Replace(s, "    block_size: [1MiB, 256KiB, 64KiB]", "    block_size: [1MiB, 64KiB]\n  matrix:\n    cache: [cold, warm]\n    workload: [node, iperf3, fio]", 1)
	s = strings.Replace(s, "create: true, cache: warm}", "create: true}", 1)
	os.WriteFile(plan, []byte(s), 0o644)
	if r := runner(t, dir, "exec", plan); r.Code != 0 {
		t.Fatalf("exec: %d\n%s", r.Code, r.Stderr)
	}
	csv := filepath.Join(dir, "out/test.csv")

	numeric, _ := json.Marshal(numericColumns())
	for _, tc := range []struct{ csv, nan, header string }{
		// iperf3 rows have no latency, tcp rows no registration figures.
		{csv, `["lat_p99_us", "registration_s", "registration_mb_s", "iops"]`, "current"},
		{"../examples/sample.csv", `["lat_p99_us", "registration_s"]`, "current"},
		{"files/csvfile/testdata/v1/mixed.csv", `["bytes"]`, "older"}, // a failed row
	} {
		out, err := exec.Command(py, "-c", pandasCheck, tc.csv, string(numeric), tc.nan, tc.header).CombinedOutput()
		if err != nil {
			t.Errorf("pandas on %s: %v\n%s", tc.csv, err, out)
		}
	}

	text := runNotebook(t, jupyter, csv, filepath.Join(dir, "sweep.png"))
	for _, want := range []string{"12 rows, 12 ok, workloads ['fio', 'iperf3', 'node']", "plan test-loop", "ratio to iperf3:", "median ratio to iperf3"} {
		if !strings.Contains(text, want) {
			t.Errorf("the notebook's output lacks %q:\n%s", want, text)
		}
	}
}

// runNotebook executes examples/sweep.ipynb on csv with jupyter nbconvert,
// checks it drew its one chart (inline and into png), and returns the text
// its cells printed.
func runNotebook(t *testing.T, jupyter, csv, png string) string {
	t.Helper()
	nbOut := filepath.Join(t.TempDir(), "executed.ipynb")
	cmd := exec.Command(jupyter, "nbconvert", "--to", "notebook", "--execute", "--ExecutePreprocessor.timeout=300",
		"--output", nbOut, "../examples/sweep.ipynb")
	cmd.Env = append(os.Environ(), "RDMASWEEP_CSV="+csv, "RDMASWEEP_PLOT="+png)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("jupyter nbconvert --execute on %s: %v\n%s", csv, err, out)
	}
	t.Logf("the notebook ran on %s in %s", filepath.Base(csv), time.Since(start).Round(100*time.Millisecond))
	b, err := os.ReadFile(nbOut)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			Outputs []struct {
				Text []string       `json:"text"`
				Data map[string]any `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	images := 0
	for _, c := range nb.Cells {
		for _, o := range c.Outputs {
			text.WriteString(strings.Join(o.Text, ""))
			if _, ok := o.Data["image/png"]; ok {
				images++
			}
		}
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 10000 || images != 1 {
		t.Errorf("chart of %s: %v %v, %d inline images", filepath.Base(csv), st, err, images)
	}
	return text.String()
}

// rdmaColumns are the columns a node row over rdma with pinned
// registration must fill: the registration figures and the rdma
// parameters of version 4.
var rdmaColumns = []string{"registration_s", "registration_mb_s", "mapping", "max_rd_atomic", "cq_moderation", "relaxed_ordering"}

// rdmaCheck reads an rdma CSV with pandas and fails unless it has ok node
// rows over rdma whose rdma columns all hold values; it prints what they
// hold.
const rdmaCheck = `import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
cols = json.loads(sys.argv[2])
rows = df[(df.status == "ok") & (df.transport == "rdma") & (df.workload == "node")]
empty = [c for c in cols if c not in df or rows[c].isna().any()]
if rows.empty or empty:
    sys.exit(f"{len(rows)} ok node rows over rdma; empty in some: {empty}")
print(len(rows), "node rows over rdma:", "; ".join(f"{c} {sorted(rows[c].unique().tolist())}" for c in cols))
`

// TestNotebookOnAnRDMACSVFromTheGuest: the notebook on a CSV with real
// rdma values, made by a short run of plans/bench-rdma.yaml in the
// soft-RoCE guest (testdata/notebook/README.md says how): its rdma columns
// hold values and are numeric where they are numbers, and the notebook
// matches node's rows with ib_read_bw's on them (cq_moderation among the
// keys, as the plan sweeps it).
func TestNotebookOnAnRDMACSVFromTheGuest(t *testing.T) {
	jupyter, py := needNotebook(t)
	csv, err := filepath.Abs("testdata/notebook/bench-rdma.csv")
	if err != nil {
		t.Fatal(err)
	}
	numeric, _ := json.Marshal(numericColumns())
	// ib_read_bw rows have no latency, and pinned registration no prefetch.
	// It was written at version 4's header; later columns are absent.
	out, err := exec.Command(py, "-c", pandasCheck, csv, string(numeric), `["lat_p99_us", "prefetch_s"]`, "older").CombinedOutput()
	if err != nil {
		t.Errorf("pandas on %s: %v\n%s", csv, err, out)
	}
	cols, _ := json.Marshal(rdmaColumns)
	out, err = exec.Command(py, "-c", rdmaCheck, csv, string(cols)).CombinedOutput()
	if err != nil {
		t.Fatalf("the rdma columns of %s: %v\n%s", csv, err, out)
	}
	t.Logf("%s", out)
	text := runNotebook(t, jupyter, csv, filepath.Join(t.TempDir(), "sweep.png"))
	for _, want := range []string{"ok, workloads ['ib_read_bw', 'node']", "plan bench-rdma", "ratio to ib_read_bw:", "cq_moderation", "median ratio to ib_read_bw"} {
		if !strings.Contains(text, want) {
			t.Errorf("the notebook's output on %s lacks %q:\n%s", csv, want, text)
		}
	}
}
