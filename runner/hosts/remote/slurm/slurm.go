// Package slurm runs the runner's commands as job steps of the Slurm
// allocation the runner itself runs in (under salloc, or in an sbatch
// script). An Allocation is that job; a Host is one of its nodes and is a
// remote.Host, so everything that drives SSH hosts drives Slurm nodes.
//
// How the remote.Host calls map onto Slurm (the flags are in step.go):
//   - Start and Run: one step per command, `srun --jobid=J --overlap
//     --whole -N1 -n1 -w NODE --kill-on-bad-exit --chdir=/ --job-name=
//     rdmasweep [--cpu-bind=…] /bin/sh -c 'print the step id; exec "$@"'
//     sh ARGV…`. stdin, stdout and stderr go through srun, as they go
//     through an SSH session. The task first prints one line, its
//     JOBID.STEPID and pid, which Start reads and does not hand on: when
//     Start returns the step exists and the command runs, so Signal can
//     reach it. --overlap lets steps share the job's CPUs; --whole gives
//     each step all of the job's CPUs on its node, as the command would
//     have on an SSH host.
//   - Prestart (remote.Prestarter): `NODE attach --runner ADDR` started as
//     such a step at once, with a fresh token in its environment as a
//     MUNGE credential; node dials the runner's listener, and its command
//     line, given later to Pending.Start, its control lines, and its
//     output and end go over that connection, sealed (attach.go). A step
//     takes tens of ms to start and srun's stdin delivered lines up to
//     0.36 s late; a line on that connection arrives in well under one.
//   - Signal: `scancel --signal=NAME JOBID.STEPID`. slurmstepd sends it to
//     every process of the step (the task leads its process group, and
//     Slurm's process tracking also finds what left the group).
//   - Run's cancellation, Close and a stop: `scancel --signal=KILL`, then
//     `scancel JOBID.STEPID`, then srun itself is killed. Only this
//     Host's own steps are ever cancelled, never the job or others' steps.
//   - Upload: sbcast, to every node of the allocation (sbcast can do no
//     less). A step on every node makes the directory and hashes what is
//     there; when every node's sha256 already matches, nothing is sent.
//     Otherwise `sbcast -f` writes a temporary file beside the target and
//     a step on every node makes it 0755 and renames it into place, so no
//     node ever sees a partial file, and a running old copy is not
//     disturbed. Concurrent Uploads of the same file to the same path, from
//     the Hosts of one Allocation, share one broadcast.
//
// Cleanup: Close cancels every step this Host started that still runs and
// waits until squeue no longer lists it. srun runs in a process group of
// its own (a Ctrl-C at the terminal reaches the runner, which decides)
// and receives SIGTERM if the runner dies, on which srun cancels its step.
//
// Where Slurm differs from SSH, and callers may notice:
//   - stdout and stderr arrive a line at a time: slurmstepd forwards whole
//     lines (srun -u would not, but it gives the task a pty).
//   - Lines Slurm itself writes on stderr ("srun: …", "slurmstepd-n1: …")
//     are taken out of the command's stderr, passed to HostOptions.Log, and
//     decide Wait's error.
//   - When a task dies by a signal, srun ends the step at once and may
//     drop what the task wrote just before (a quarter of the time here
//     for `echo x; kill -TERM $$`). A command that exits by itself loses
//     nothing.
//   - The command's environment is the runner's (srun --export=ALL), not
//     a login shell's, and it starts in /.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/agent"
)

// ErrNoAllocation means the runner is not inside a Slurm allocation.
var ErrNoAllocation = errors.New("not inside a Slurm allocation")

// tools are the Slurm client commands the package runs.
var tools = []string{"srun", "sbcast", "scancel", "squeue", "scontrol"}

// Allocation is the Slurm job the runner runs inside. It is safe for
// concurrent use.
type Allocation struct {
	// JobID is SLURM_JOB_ID.
	JobID string

	nodes []string
	env   []string

	mu      sync.Mutex
	flights map[string]*flight // broadcasts under way, by remote path
	sent    map[string]*sent   // the last broadcast that sent, by remote path
	// deployed are the files broadcast to every node: every step whose
	// argv names one is guarded (remote.Guard).
	deployed remote.Deployed

	// Where prestarted nodes attach (attach.go): a listener per address
	// the nodes reach the runner at, the listener's address as each node
	// reaches it, and the tokens given out.
	listeners map[string]net.Listener
	localAddr map[string]string
	tokens    agent.Tokens

	// The munged socket the tokens' credentials are made with (attach.go).
	mungeSocket string
	mungeKnown  bool
}

// FromEnv returns the allocation that env (an os.Environ()-style list)
// describes: SLURM_JOB_ID and SLURM_JOB_NODELIST, as salloc and sbatch set
// them. env is also the environment of every Slurm command the
// allocation's Hosts run, so SLURM_CONF and the like in it apply. The
// node list is expanded by `scontrol show hostnames`, never parsed here.
func FromEnv(ctx context.Context, env []string) (*Allocation, error) {
	job := lookup(env, "SLURM_JOB_ID", "SLURM_JOBID")
	if job == "" {
		return nil, fmt.Errorf("%w: SLURM_JOB_ID is not set (run the runner under salloc, or in an sbatch script)", ErrNoAllocation)
	}
	list := lookup(env, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if list == "" {
		return nil, fmt.Errorf("%w: SLURM_JOB_ID is %s but SLURM_JOB_NODELIST is not set", ErrNoAllocation, job)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("slurm job %s: %s not found on PATH: run the runner where Slurm's client commands are", job, tool)
		}
	}
	a := &Allocation{JobID: job, env: append([]string(nil), env...), flights: map[string]*flight{}, sent: map[string]*sent{}}
	out, err := a.output(ctx, "scontrol", "show", "hostnames", list)
	if err != nil {
		return nil, fmt.Errorf("slurm job %s: expand node list %q: %w", job, list, err)
	}
	a.nodes = strings.Fields(string(out))
	if len(a.nodes) == 0 {
		return nil, fmt.Errorf("slurm job %s: node list %q names no nodes", job, list)
	}
	return a, nil
}

// lookup is the value of the first of keys set in env; the last
// assignment of a key wins, as in exec.Cmd.
func lookup(env []string, keys ...string) string {
	for _, k := range keys {
		v := ""
		for _, kv := range env {
			if val, ok := strings.CutPrefix(kv, k+"="); ok {
				v = val
			}
		}
		if v != "" {
			return v
		}
	}
	return ""
}

// Nodes lists the allocation's nodes in Slurm's order (the first is the
// one a plan with no hosts: section makes the server).
func (a *Allocation) Nodes() []string { return append([]string(nil), a.nodes...) }

// Missing returns the names that are not nodes of the allocation, in the
// order given, each once; nil when all are. Names are compared as Slurm
// writes them (NodeName), exactly.
func (a *Allocation) Missing(names ...string) []string {
	in := map[string]bool{}
	for _, n := range a.nodes {
		in[n] = true
	}
	var missing []string
	for _, n := range names {
		if !in[n] {
			missing = append(missing, n)
			in[n] = true // report it once
		}
	}
	return missing
}

// NodeAddr is the address Slurm reaches node at (its NodeAddr), which is
// where a client on another node dials a server on it: node names need not
// resolve on the nodes. It is node itself when Slurm says no other.
func (a *Allocation) NodeAddr(ctx context.Context, node string) string {
	out, err := a.output(ctx, "scontrol", "show", "node", "-o", node)
	if err != nil {
		return node
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "NodeAddr="); ok && v != "" {
			return v
		}
	}
	return node
}

// Steps lists the allocation's live steps, as JOBID.STEPID, whoever
// started them (a batch script's own step is one).
func (a *Allocation) Steps(ctx context.Context) ([]string, error) {
	out, err := a.output(ctx, "squeue", "-h", "-s", "-j", a.JobID, "-o", "%i")
	if err != nil {
		return nil, fmt.Errorf("list the steps of slurm job %s: %w", a.JobID, err)
	}
	return strings.Fields(string(out)), nil
}

// command is a Slurm client command with the allocation's environment.
func (a *Allocation) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = a.env
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// output runs a Slurm client command and returns its stdout; a failure
// carries its stderr.
func (a *Allocation) output(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stderr strings.Builder
	cmd := a.command(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
