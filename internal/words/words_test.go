package words

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{
		{0, "run", "0 runs"},
		{1, "run", "1 run"},
		{2, "point", "2 points"},
		{999, "link", "999 links"},
		{1000, "link", "1,000 links"},
		{4032, "link", "4,032 links"},
		{1234567, "read", "1,234,567 reads"},
		{-1500, "byte", "-1,500 bytes"},
	} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
