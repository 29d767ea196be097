package meminfo

import "testing"

func TestField(t *testing.T) {
	b := []byte("MemTotal:        2014848 kB\nMemFree:         1000000 kB\nMemAvailable:    1748000 kB\nHugePages_Total:       4\nBad:\n")
	for _, c := range []struct {
		name string
		want int64
		ok   bool
	}{
		{"MemAvailable", 1748000 * 1024, true},
		{"MemTotal", 2014848 * 1024, true},
		{"HugePages_Total", 4, true}, // no unit: a count
		{"Bad", 0, false},
		{"Missing", 0, false},
	} {
		got, err := Field(b, c.name)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Field(%s) = %d, %v; want %d, ok %v", c.name, got, err, c.want, c.ok)
		}
	}
	if n, err := Available(); err != nil || n <= 0 {
		t.Errorf("Available() = %d, %v", n, err)
	}
}
