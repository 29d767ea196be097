package results

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes a size may carry, longest first so that "KiB"
// is tried before "B"-less forms. Binary units are powers of 1024, decimal
// ones powers of 1000, as disks and NICs are sold in both.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
}

// ParseSize parses a size: a plain integer is bytes; KiB, MiB, GiB and TiB
// are powers of 1024; KB, MB, GB and TB powers of 1000. The number must be
// a whole decimal integer directly followed by the unit ("4KiB", not
// "4 KiB", "4K" or "4kb"). A leading "-" is parsed, so callers can tell a
// negative size from a malformed one; range checks are the caller's.
func ParseSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	neg := strings.HasPrefix(num, "-")
	digits := strings.TrimPrefix(num, "-")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("must be a size like 4KiB (got %q)%s", s, sizeHint(s))
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	n *= mult
	if neg {
		n = -n
	}
	return n, nil
}

// FormatSize formats n bytes for people: in the largest binary unit that
// divides it exactly (4194304 -> "4MiB", 1536 -> "1536", 0 -> "0"), else as
// a plain byte count. ParseSize(FormatSize(n)) == n for every n.
func FormatSize(n int64) string {
	if n != 0 {
		for i := len(sizeUnits[:4]) - 1; i >= 0; i-- {
			u := sizeUnits[i]
			if n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.suffix
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// SizeText writes n bytes for a person, in powers of 1024 with one
// decimal where the figure is not whole: "8MiB", "1.7GiB", "512B". Unlike
// FormatSize it rounds; it is for messages and tables, never for a plan.
func SizeText(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d%s", int64(f), units[i])
	}
	return fmt.Sprintf("%.1f%s", f, units[i])
}

// sizeHint is " (did you mean 4KiB?)" for a size written as other tools
// take it, with a one-letter or lowercase unit (fio's 4k, dd's 1M, 4kb),
// which rdmasweep reads as binary units.
func sizeHint(s string) string {
	digits := strings.TrimRight(s, "kKmMgGtTbB")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s[len(digits):], "b"), "B"))
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" || len(unit) != 1 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%siB?)", digits, unit)
}
