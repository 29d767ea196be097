package slurm

import (
	"fmt"
	"math/big"
	"strconv"

	"rdmasweep/internal/cpuset"
)

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
	ids, err := cpuset.Parse(cpus)
	if err != nil {
		return "", fmt.Errorf("cpus %q: %w", cpus, err)
	}
	set := new(big.Int)
	for _, c := range ids.Sorted() {
		set.SetBit(set, c, 1)
	}
	if set.BitLen()-1 == int(set.TrailingZeroBits()) {
		return "map_cpu:" + strconv.Itoa(set.BitLen()-1), nil
	}
	return "mask_cpu:0x" + set.Text(16), nil
}
