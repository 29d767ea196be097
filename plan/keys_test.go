package plan

import (
	"fmt"
	"os"
	"strings"
	"testing"
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
