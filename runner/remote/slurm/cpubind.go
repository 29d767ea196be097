package slurm

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxCPU bounds the CPU ids a list may name.
const maxCPU = 8191

// CPUBind turns a taskset-style CPU list ("0-3,8", ids as the node
// numbers them) into srun's --cpu-bind value for a one-task step:
// "map_cpu:N" for one CPU, else "mask_cpu:0x…" with those CPUs' bits.
// map_cpu cannot express a set: it gives task i the i-th CPU of the list,
// so a one-task step would be pinned to the first CPU only.
//
// taskset inside a step could name CPUs outside the step's cpuset; through
// --cpu-bind Slurm checks them, and srun refuses a CPU the job does not
// hold on the node ("CPU binding outside of job step allocation"): pinning
// wants whole nodes (salloc --exclusive). Slurm binds only where its task
// plugin does (task/affinity or task/cgroup).
func CPUBind(cpus string) (string, error) {
	set, err := parseCPUList(cpus)
	if err != nil {
		return "", err
	}
	if set.BitLen() == 0 {
		return "", fmt.Errorf("cpus %q: names no CPU", cpus)
	}
	if set.BitLen()-1 == int(set.TrailingZeroBits()) {
		return "map_cpu:" + strconv.Itoa(set.BitLen()-1), nil
	}
	return "mask_cpu:0x" + set.Text(16), nil
}

// parseCPUList parses "0-3,8" (what taskset --cpu-list takes, without
// strides) into a bit set.
func parseCPUList(s string) (*big.Int, error) {
	set := new(big.Int)
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("cpus %q: empty CPU list", s)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b > maxCPU {
			return nil, fmt.Errorf("cpus %q: %q is not a CPU or a range of CPUs like 0-3 (ids 0 to %d)", s, part, maxCPU)
		}
		for c := a; c <= b; c++ {
			set.SetBit(set, c, 1)
		}
	}
	return set, nil
}
