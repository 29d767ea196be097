package results

import (
	"strings"
	"testing"
)

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {"4KiB", 4096}, {"1MiB", 1 << 20}, {"3GiB", 3 << 30}, {"2TiB", 2 << 40},
		{"4KB", 4000}, {"1MB", 1e6}, {"5GB", 5e9}, {"2TB", 2e12}, {"-4KiB", -4096}, {"8388607TiB", 8388607 << 40},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "4kb", "4K", "4 KiB", "4k", "KiB", "4.5KiB", "0x10", "4KiBs", "1e3", "+4", "4B", "--4", "8388608TiB", "99999999999999999999"} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, n)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseSize(%q): error %q does not quote the input", bad, err)
		}
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1000, "1000"}, {1536, "1536"}, {4096, "4KiB"}, {4 << 20, "4MiB"}, {512 << 10, "512KiB"},
		{1 << 30, "1GiB"}, {3 << 40, "3TiB"}, {1024 << 40, "1024TiB"}, {1e6, "1000000"}, {-2048, "-2KiB"},
	} {
		if got := FormatSize(tc.n); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	// Round trip over many values, including every power of two and its
	// neighbours.
	for shift := 0; shift < 63; shift++ {
		for _, n := range []int64{1 << shift, 1<<shift - 1, 1<<shift + 1, 3 << max(shift-2, 0), 1000 << min(shift, 50)} {
			if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
				t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), got, err)
			}
		}
	}
}
