// Package cpuset reads and writes CPU lists as Linux writes them in sysfs
// (cpulist files, smp_affinity_list) and taskset takes them: "0-3,8".
package cpuset

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Max is the largest CPU id a list may name: Linux's NR_CPUS reaches 8192.
const Max = 8191

// Set is a set of CPU ids.
type Set map[int]bool

// Parse reads a CPU list: ids and ranges separated by commas, "0-3,8".
// Blanks around the list and its parts are allowed. An empty list, or a
// part that is not an id or an ascending range of ids from 0 to Max, is
// an error that names the part.
func Parse(s string) (Set, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty CPU list")
	}
	out := Set{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > Max {
			return nil, fmt.Errorf("%q is not a CPU or a range of CPUs like 0-3 (ids 0 to %d)", part, Max)
		}
		for c := a; c <= b; c++ {
			out[c] = true
		}
	}
	return out, nil
}

// Sorted is the set's ids in ascending order.
func (s Set) Sorted() []int {
	cpus := make([]int, 0, len(s))
	for c, in := range s {
		if in {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return cpus
}

// String writes the set as sysfs does, runs folded into ranges: "0-3,8".
func (s Set) String() string {
	cpus := s.Sorted()
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
