package results

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A Rate is an offered load, one client's: bytes per second or reads per
// second, as a plan writes it ("200MB/s", "1.5GB/s", "50000iops"). The
// zero Rate offers nothing: the client is closed-loop.
type Rate struct {
	BytesPerS float64 // > 0 when written in bytes per second
	IOPS      float64 // > 0 when written in reads per second
}

// rateUnits are the suffixes of a rate in bytes per second: powers of
// 1000, as MB/s is everywhere in the CSV.
var rateUnits = []struct {
	suffix string
	mult   float64
}{
	{"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9},
}

// ParseRate parses a rate: a positive decimal number directly followed by
// KB/s, MB/s or GB/s (10^3, 10^6, 10^9 bytes per second), or by iops
// (reads per second). The empty string is the zero Rate.
func ParseRate(s string) (Rate, error) {
	if s == "" {
		return Rate{}, nil
	}
	num, mult, iops := "", 0.0, false
	if strings.HasSuffix(s, "iops") {
		num, iops = strings.TrimSuffix(s, "iops"), true
	}
	for _, u := range rateUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
		}
	}
	bad := fmt.Errorf("must be a rate like 200MB/s or 50000iops (got %q)", s)
	if num == "" || strings.TrimLeft(num, "0123456789.") != "" {
		return Rate{}, bad
	}
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil:
		return Rate{}, bad
	case !(f > 0) || math.IsInf(f, 0):
		return Rate{}, fmt.Errorf("must be more than 0 (got %q); leave it unset for a closed loop", s)
	case iops:
		return Rate{IOPS: f}, nil
	}
	return Rate{BytesPerS: f * mult}, nil
}

// IsZero reports whether r offers nothing (closed loop).
func (r Rate) IsZero() bool { return r.BytesPerS == 0 && r.IOPS == 0 }

// ReadsPerS is the rate in reads of blockSize bytes per second.
func (r Rate) ReadsPerS(blockSize int64) float64 {
	if r.IOPS > 0 || blockSize <= 0 {
		return r.IOPS
	}
	return r.BytesPerS / float64(blockSize)
}

// MBs is the rate in MB/s (10^6 bytes per second) of blockSize reads.
func (r Rate) MBs(blockSize int64) float64 {
	if r.IOPS > 0 {
		return r.IOPS * float64(blockSize) / 1e6
	}
	return r.BytesPerS / 1e6
}
