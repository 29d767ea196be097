// Package meminfo reads /proc/meminfo: what node host reports and what
// the rdma transport checks before it pins a region.
package meminfo

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Field returns the field name of a /proc/meminfo text in bytes.
func Field(b []byte, name string) (int64, error) {
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s in /proc/meminfo", name)
}

// Available is this host's MemAvailable, in bytes.
func Available() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return Field(b, "MemAvailable")
}
