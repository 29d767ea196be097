package plan

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"rdmasweep/results"
)

// TestKeysGolden pins the point keys of the checked-in plans and a few
// testdata plans. Rows in users' CSVs are matched on these keys, so a
// change here breaks resume for everyone: update the golden file only for
// a deliberate, announced change to the key.
func TestKeysGolden(t *testing.T) {
	var b strings.Builder
	for _, file := range []string{"../plans/loopback.yaml", "../plans/ssd-sweep.yaml", "testdata/good/full.yaml", "testdata/good/minimal.yaml", "testdata/good/crossed.yaml"} {
		p, err := Load(file, Options{})
		if err != nil {
			t.Fatal(err)
		}
		pts, err := Expand(p, ExpandOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s\n", file)
		fmt.Fprintf(&b, "# canonical JSON of point 0: %s\n", keyJSON(p.Name, pts[0]))
		for _, pt := range pts {
			var sw []string
			for _, s := range pt.Swept {
				sw = append(sw, s.Name+"="+s.Value)
			}
			fmt.Fprintf(&b, "%d %s %s\n", pt.Index, pt.Key, strings.Join(sw, " "))
		}
	}
	const golden = "testdata/keys.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("point keys changed; CSV rows written before will no longer match.\ngot:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestKeyOfALaterParameter holds the rule that keeps keys stable as
// parameters are added: one with Since > 1 enters the key only when a
// point sets it away from its default, wherever it lives (top level, a
// section, or per host).
func TestKeyOfALaterParameter(t *testing.T) {
	p, err := Load("../plans/loopback.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Expand(p, ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pt := pts[0]
	for _, later := range []*results.Param{
		{Name: "later_top", Kind: results.KindInt, Default: "7", Since: 2},
		{Name: "later_client", Section: "client", Kind: results.KindEnum, Enum: []string{"a", "b"}, Default: "a", Since: 2},
		{Name: "later_rdma", Section: "rdma", Kind: results.KindInt, Default: "0", Since: 2},
		{Name: "later_host", Section: "rdma", Kind: results.KindInt, Default: "3", PerHost: true, Since: 2},
	} {
		params := append(results.Params(), later)
		def, _ := parseDefault(later)
		at := pt
		at.Values = pt.Values.clone()
		at.Hosts.Clients = []Host{pt.Hosts.Client()}
		at.Hosts.Clients[0].Params = pt.Hosts.Client().Params.clone()
		set := func(v value) {
			if later.PerHost {
				at.Hosts.Clients[0].Params.set(later.Name, v)
			} else {
				at.Values.set(later.Name, v)
			}
		}
		set(def)
		if got, want := string(keyJSONOf(p.Name, at, params)), string(keyJSON(p.Name, pt)); got != want {
			t.Errorf("%s at its default changed the key's JSON:\n got %s\nwant %s", later.Name, got, want)
		}
		other := value{n: 9, s: "b"}
		set(other)
		got := string(keyJSONOf(p.Name, at, params))
		if got == string(keyJSON(p.Name, pt)) || !strings.Contains(got, `"`+later.Name+`":`) {
			t.Errorf("%s away from its default is not in the key: %s", later.Name, got)
		}
	}
}
