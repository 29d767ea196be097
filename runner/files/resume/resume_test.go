package resume

import (
	"fmt"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// TestRepetitionsRunInPairs: with repeat, a point and its peers take
// turns (node r1, iperf3 r1, node r2, …), so drift hits both alike;
// points without peers keep their repetitions back to back.
func TestRepetitionsRunInPairs(t *testing.T) {
	p, err := plan.Parse("t.yaml", []byte(`name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: /tmp/t.dat, file_size: 64MiB}
sweep: {matrix: {block_size: [1MiB, 4KiB], workload: [node, iperf3]}}
repeat: 2
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	todo, _ := Pending(pts, 2, nil, false)
	var got []string
	for _, j := range todo {
		got = append(got, fmt.Sprintf("%s/%s/r%d", results.FormatSize(j.Point.Values.Int(param.BlockSize)), j.Point.Values.Str(param.Workload), j.Rep))
	}
	want := "[1MiB/node/r1 1MiB/iperf3/r1 1MiB/node/r2 1MiB/iperf3/r2 4KiB/node/r1 4KiB/iperf3/r1 4KiB/node/r2 4KiB/iperf3/r2]"
	if fmt.Sprint(got) != want {
		t.Errorf("order %v\nwant %s", got, want)
	}
	todo, _ = Pending(pts[:1], 2, nil, false)
	if len(todo) != 2 || todo[0].Rep != 1 || todo[1].Rep != 2 {
		t.Errorf("a lone point: %+v", todo)
	}
}
