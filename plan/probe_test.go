package plan

import "testing"

// TestProbeKeysAsASweptValue: a probe of the search is keyed as the point
// of a plan that swept the parameter to that value, so the rows of either
// are one point's to resume.
func TestProbeKeysAsASweptValue(t *testing.T) {
	const hosts = "name: k\nhosts:\n  server: {address: local}\n  client: {address: local}\nserver: {file: /tmp/k.dat, file_size: 1MiB}\n"
	searched, err := Parse("s.yaml", []byte(hosts+"sweep:\n  matrix:\n    block_size: [4KiB, 8KiB]\nsearch:\n  param: queue_depth\n  from: 1\n  to: 8\n  until: {metric: lat_p99_us, at_most: 100}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	swept, err := Parse("w.yaml", []byte(hosts+"sweep:\n  matrix:\n    block_size: [4KiB, 8KiB]\n    queue_depth: [1, 4]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := Expand(searched, ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Expand(swept, ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, pt := range outer {
		for j, v := range []int64{1, 4} {
			probe := searched.Search.Probe(pt, v)
			w := want[2*i+j]
			if probe.Key != w.Key || paramsOf(probe) != paramsOf(w) {
				t.Errorf("probe of point %d at queue_depth=%d: key %s (%s), want %s (%s)", i, v, probe.Key, paramsOf(probe), w.Key, paramsOf(w))
			}
		}
		if len(pt.Swept) != 1 {
			t.Errorf("Probe changed the outer point's Swept: %v", pt.Swept)
		}
	}
}

func paramsOf(pt Point) string {
	s := ""
	for _, p := range pt.Swept {
		s += p.Name + "=" + p.Value + " "
	}
	return s
}
