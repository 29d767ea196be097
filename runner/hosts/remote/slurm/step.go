package slurm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/runner/hosts/remote"
)

// stepMarker starts the line each task prints before it execs the
// command: the marker, then JOBID.STEPID:PID.
const stepMarker = "\x1frdmasweep-step:"

// wrapper is the task's shell: print the marker line, then become the
// command (keeping the pid, which leads the task's process group).
const wrapper = `printf '\037rdmasweep-step:%s.%s:%s\n' "$SLURM_JOB_ID" "$SLURM_STEP_ID" "$$"; exec "$@"`

// stepSpec is one step to launch.
type stepSpec struct {
	nodes []string // one task on each
	bind  string   // --cpu-bind value; "" for none
	argv  []string
	stdin bool     // give the task a stdin pipe; else /dev/null
	env   []string // added to the allocation's environment
	log   func(string)
}

// srunArgs is srun's command line for s; name is the step's unique
// name, by which squeue finds a step whose id is not yet known.
func (a *Allocation) srunArgs(s stepSpec, name string) []string {
	n := strconv.Itoa(len(s.nodes))
	args := []string{
		"--jobid=" + a.JobID,
		"--overlap", "--whole",
		"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1",
		"--nodelist=" + strings.Join(s.nodes, ","),
		"--chdir=/", "--job-name=" + name,
	}
	// One task has no others to kill when it fails, and with
	// --kill-on-bad-exit its slurmstepd lingers 2.4 s after a non-zero
	// exit (0.07 s without) while srun signals the finished step.
	if len(s.nodes) > 1 {
		args = append(args, "--kill-on-bad-exit")
	}
	if s.bind != "" {
		args = append(args, "--cpu-bind="+s.bind)
	}
	args = append(args, "/bin/sh", "-c", wrapper, "sh")
	return append(args, s.argv...)
}

// process is one srun and its step.
type process struct {
	a    *Allocation
	cmd  *exec.Cmd
	node string // nodes[0], for messages
	name string // the step's unique name

	step string // JOBID.STEPID, from the marker
	pid  int    // task 0's pid on its node

	stdin  io.WriteCloser
	stdout *eofCloser
	stderr *io.PipeReader

	mu         sync.Mutex
	slurmLines []string

	exited chan struct{} // srun has exited
	done   chan struct{} // and its stderr is read to the end: err is set
	err    error
}

// launch starts the step and returns once its first task has printed the
// marker, so the step exists and the command runs. If ctx ends first, the
// launch is aborted (see abort) and ctx's error returned.
func (a *Allocation) launch(ctx context.Context, s stepSpec) (*process, error) {
	if len(s.argv) == 0 {
		return nil, errors.New("no command")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	name := "rdmasweep-" + hex.EncodeToString(rnd[:])
	cmd := exec.Command("srun", a.srunArgs(s, name)...)
	cmd.Env = append(a.env[:len(a.env):len(a.env)], s.env...)
	// Its own process group: a Ctrl-C at the terminal goes to the runner,
	// not to srun (which would act on it by itself). If the runner dies,
	// srun gets SIGTERM, on which it cancels its step.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	p := &process{a: a, cmd: cmd, node: s.nodes[0], name: name, exited: make(chan struct{}), done: make(chan struct{})}
	var err error
	if s.stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start srun: %w", err)
	}
	p.stdout = &eofCloser{f: outR}
	pr, pw := io.Pipe()
	p.stderr = pr
	filtered := make(chan struct{})
	go func() {
		p.filterStderr(errR, pw, s.log)
		errR.Close()
		close(filtered)
	}()
	go func() {
		werr := cmd.Wait()
		close(p.exited)
		<-filtered
		p.err = p.exitError(werr)
		close(p.done)
	}()

	type marker struct {
		step string
		pid  int
		err  error
	}
	got := make(chan marker, 1)
	go func() {
		step, pid, err := readMarker(outR)
		got <- marker{step, pid, err}
	}()
	var m marker
	select {
	case m = <-got:
	case <-ctx.Done():
		p.abort()
		return nil, ctx.Err()
	}
	if m.err != nil {
		// srun ended before the task ran: its own messages say why.
		p.abort()
		msg := p.slurmMessage()
		if msg == "" {
			msg = m.err.Error()
		}
		if strings.Contains(msg, "CPU binding outside of job step allocation") {
			msg += " (the job has only those CPUs on the node: allocate whole nodes, salloc --exclusive)"
		}
		return nil, fmt.Errorf("srun on %s: %s", strings.Join(s.nodes, ","), msg)
	}
	p.step, p.pid = m.step, m.pid
	return p, nil
}

// maxMarkerLine bounds the first stdout line, which is the marker.
const maxMarkerLine = 256

// readMarker reads the first stdout line, a byte at a time so nothing of
// the command's own output is consumed: the step and the task's pid.
func readMarker(r io.Reader) (step string, pid int, err error) {
	var line []byte
	one := make([]byte, 1)
	for len(line) < maxMarkerLine {
		if _, err := io.ReadFull(r, one); err != nil {
			return "", 0, fmt.Errorf("srun ended before the command ran (%v)", err)
		}
		if one[0] == '\n' {
			break
		}
		line = append(line, one[0])
	}
	rest, ok := bytes.CutPrefix(line, []byte(stepMarker))
	step, p, ok2 := strings.Cut(string(rest), ":")
	n, err := strconv.Atoi(p)
	if !ok || !ok2 || err != nil || !strings.Contains(step, ".") {
		return "", 0, fmt.Errorf("the task's first line is %q, not its step id", line)
	}
	return step, n, nil
}

// slurmLineRE matches what srun and slurmstepd write themselves, as
// opposed to the task's stderr, which they forward.
var slurmLineRE = regexp.MustCompile(`^(srun|slurmstepd(-[^:\s]+)?): `)

// filterStderr copies srun's stderr to w, but for Slurm's own lines,
// which it keeps and hands to log. A last line without a newline is the
// task's. Once w's reader is closed it still reads to the end, so srun
// never blocks on a full pipe.
func (p *process) filterStderr(r io.Reader, w *io.PipeWriter, log func(string)) {
	defer w.Close()
	br := bufio.NewReader(r)
	forward := true
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] == '\n' && slurmLineRE.Match(line) {
				s := strings.TrimRight(string(line), "\n")
				p.mu.Lock()
				p.slurmLines = append(p.slurmLines, s)
				p.mu.Unlock()
				if log != nil {
					log(s)
				}
			} else if forward {
				if _, werr := w.Write(line); werr != nil {
					forward = false
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// slurmMessage is Slurm's own lines, for an error.
func (p *process) slurmMessage() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.slurmLines, "; ")
}

// taskEndRE finds srun's report of how a task ended, e.g. "srun: error:
// n1: task 0: Exited with exit code 3" or "…: task 0: Terminated".
var taskEndRE = regexp.MustCompile(`: tasks? [0-9,\-]+: (.+)$`)
var exitCodeRE = regexp.MustCompile(`^Exited with exit code (\d+)$`)

// exitError maps srun's end to the remote.Host contract: nil, an
// *ExitError from the task's exit status or signal, or
// ErrConnectionLost when the step was lost without its task's status (a
// node failure, srun killed).
func (p *process) exitError(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	rc := ee.ExitCode()
	if rc < 0 { // srun itself died by a signal
		return fmt.Errorf("%w: srun on %s was killed (%v)", remote.ErrConnectionLost, p.node, ee)
	}
	p.mu.Lock()
	var end string
	for _, l := range p.slurmLines {
		if m := taskEndRE.FindStringSubmatch(l); m != nil {
			end = m[1]
		}
	}
	p.mu.Unlock()
	if m := exitCodeRE.FindStringSubmatch(end); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &remote.ExitError{Status: n}
	}
	if end != "" && rc > 128 {
		return &remote.ExitError{Status: -1, Signal: signalName(syscall.Signal(rc - 128))}
	}
	if end != "" {
		return &remote.ExitError{Status: rc}
	}
	msg := p.slurmMessage()
	if msg == "" {
		msg = fmt.Sprintf("srun exited %d", rc)
	}
	return fmt.Errorf("%w: step %s on %s: %s", remote.ErrConnectionLost, p.step, p.node, msg)
}

func (p *process) Stdin() io.WriteCloser {
	if p.stdin == nil {
		return nopWriteCloser{}
	}
	return p.stdin
}
func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// scancelTimeout bounds each scancel.
const scancelTimeout = 15 * time.Second

// Signal delivers sig to every process of the step. After the step has
// ended it does nothing and returns nil.
func (p *process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("signal %v: not a syscall.Signal", sig)
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), scancelTimeout)
	defer cancel()
	return p.scancel(ctx, "--signal="+signalName(s))
}

// scancel runs scancel with args on the step. A step that has already
// ended is no error: there is nothing left to act on.
//
// scancel's answers are not to be trusted word for word. Slurm 22.05's
// `scancel --signal=SIG JOB.STEP` delivers the signal, then says "error:
// Kill job error on job step id JOB: Invalid job id specified" and exits
// 225, whether or not the step runs; with --signal=KILL it ends the step
// and says "…: No error", exiting 0. So exit 0 is success, and "Invalid
// job id specified" is taken to mean delivered or already gone: the step
// id came from the task itself, so it is never another's.
func (p *process) scancel(ctx context.Context, args ...string) error {
	args = append(append([]string{}, args...), p.step)
	out, err := p.a.command(ctx, "scancel", args...).CombinedOutput()
	msg := strings.TrimSpace(string(out))
	if err == nil || stepGone(msg) {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("scancel %s: %w", strings.Join(args, " "), ctx.Err())
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	return fmt.Errorf("scancel %s: %v: %s", strings.Join(args, " "), err, msg)
}

// stepGone recognises scancel's answers about a step that has ended.
func stepGone(msg string) bool {
	for _, s := range []string{"Invalid job id specified", "already completing or completed", "does not exist", "Job/step already completing"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// stop ends the step for good: SIGKILL to its processes, then Slurm's
// own cancellation, then srun itself. It returns once srun has exited.
func (p *process) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*scancelTimeout)
	defer cancel()
	for _, args := range [][]string{{"--signal=KILL"}, {}} {
		select {
		case <-p.exited:
			return
		default:
		}
		p.scancel(ctx, args...)
		select {
		case <-p.exited:
			return
		case <-time.After(5 * time.Second):
		}
	}
	p.cmd.Process.Kill()
	<-p.exited
}

// abort ends a launch that did not get as far as the marker. srun
// cancels its step (or its request for one) on SIGTERM, but not while it
// waits on a hung node: then the step, found by its name, is cancelled
// and srun killed. Nobody will read the pipes: they are closed, and abort
// returns once srun's end is recorded, within about two seconds.
func (p *process) abort() {
	p.stderr.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		// scancel waits while slurmctld tries the hung node (5 s each
		// here), but slurmctld has the request once it is sent: abort
		// does not wait for its answer.
		if step := p.a.stepNamed(p.name); step != "" {
			p.step = step
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), scancelTimeout)
				defer cancel()
				p.scancel(ctx, "--signal=KILL")
				p.scancel(ctx)
			}()
		}
		p.cmd.Process.Kill()
	}
	<-p.done
	p.stdout.close()
}

// stepNamed is the id of the live step called name, or "".
func (a *Allocation) stepNamed(name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), scancelTimeout)
	defer cancel()
	out, err := a.output(ctx, "squeue", "-h", "-s", "-j", a.JobID, "-o", "%i %j")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == name {
			return f[0]
		}
	}
	return ""
}

// Wait waits for srun to end and maps how the task ended.
func (p *process) Wait() error {
	<-p.done
	return p.err
}

// signalName is the name scancel and OpenSSH use: "TERM", "KILL".
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(s))
}

// eofCloser closes the pipe once its reader has seen EOF, so a finished
// command holds no descriptor; Close closes it earlier.
type eofCloser struct {
	f    *os.File
	once sync.Once
}

func (r *eofCloser) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err == io.EOF {
		r.close()
	}
	return n, err
}

func (r *eofCloser) close() { r.once.Do(func() { r.f.Close() }) }

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return 0, errors.New("no stdin") }
func (nopWriteCloser) Close() error                { return nil }
