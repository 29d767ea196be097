package vmtest

import (
	"slices"
	"testing"
)

// TestGuestSkips reads skips, with their reasons, out of real go test -v
// output: a top-level skip, a subtest's skip whose parent logs after it,
// and passes that are no skips.
func TestGuestSkips(t *testing.T) {
	out := `=== RUN   TestA
    a_test.go:3: no siw0 here
--- SKIP: TestA (0.00s)
=== RUN   TestB
=== RUN   TestB/sub
    a_test.go:4: reason 2
=== NAME  TestB
    a_test.go:4: after
--- PASS: TestB (0.00s)
    --- SKIP: TestB/sub (0.00s)
=== RUN   TestC
--- PASS: TestC (0.00s)
=== RUN   TestD
--- SKIP: TestD (0.00s)
PASS
`
	want := []string{"TestA: no siw0 here", "TestB/sub: reason 2", "TestD"}
	if got := guestSkips(out); !slices.Equal(got, want) {
		t.Errorf("guestSkips = %q, want %q", got, want)
	}
	if got := guestSkips("=== RUN   TestC\n--- PASS: TestC (0.00s)\nPASS\n"); got != nil {
		t.Errorf("guestSkips of a run with no skip = %q", got)
	}
}
