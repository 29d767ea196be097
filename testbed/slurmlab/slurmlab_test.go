package slurmlab_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"rdmasweep/testbed/slurmlab"
)

// TestCluster checks the harness with Slurm's own commands: an
// allocation over every node, a step on each, node-local directories,
// and a salloc-run command that sees its allocation.
func TestCluster(t *testing.T) {
	c := slurmlab.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	j := c.Allocate(t, slurmlab.AllocOptions{})
	out, err := j.Command(ctx, "scontrol", "show", "hostnames", j.NodeList).Output()
	if got := strings.Fields(string(out)); err != nil || strings.Join(got, " ") != "n1 n2 n3" {
		t.Fatalf("scontrol show hostnames %s = %q, %v", j.NodeList, out, err)
	}
	// Each task reports the hostname its node has, and the node-local
	// directory holds only what that node wrote.
	out, err = j.Command(ctx, "srun", "--overlap", "-N3", "-n3", "-l", "sh", "-c",
		`echo "$(hostname)" > `+slurmlab.LocalDir+`/mark && echo "$(hostname) $SLURMD_NODENAME $(cat `+slurmlab.LocalDir+`/mark)"`).CombinedOutput()
	if err != nil {
		t.Fatalf("srun on every node: %v: %s", err, out)
	}
	for _, n := range slurmlab.NodeNames {
		if !strings.Contains(string(out), n+" "+n+" "+n+"\n") {
			t.Errorf("srun on every node printed %q, want a line %q", out, n+" "+n+" "+n)
		}
		if got, err := c.Nodes[n].Output("cat", slurmlab.LocalDir+"/mark"); err != nil || got != n+"\n" {
			t.Errorf("%s's node-local mark = %q, %v", n, got, err)
		}
	}
	// slurmstepd outlives srun by a moment.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		steps, left := j.Steps(t), c.Leftovers(t)
		if len(steps) == 0 && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10s after srun ended: steps %q, processes on the nodes %q", steps, left)
			break
		}
	}
	// salloc runs a command inside an allocation of its own.
	out, err = c.Salloc(ctx, 2, "sh", "-c", `echo "$SLURM_NNODES $SLURM_JOB_NODELIST"`).Output()
	if err != nil || !strings.HasPrefix(string(out), "2 n[") {
		t.Errorf("salloc -N2 = %q, %v", out, err)
	}
}
