package main

// node nvmet and node nvmeof-read: NVMe over Fabrics as a peer of node
// serve and node read (runner/points/peer's nvmeof). nvmet makes the
// target for one point and tears it down when it ends; nvmeof-read
// connects, runs fio on the namespace, checks a sample of blocks against
// the file's pattern and disconnects. The configfs and sysfs work is
// node/nvmeof's.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/nvmeof"
	"rdmasweep/node/pattern"
	"rdmasweep/node/session"
	"rdmasweep/results"
)

// fabricFlags are what both sides name: the transport and where. The
// subsystem's and the host's NQN and the host's DH-HMAC-CHAP key come
// from the point's secret (nvmeof.Names, nvmeof.Key), which arrives on the
// control line (--control-stdin), never in argv: ps shows argv to every
// local user.
type fabricFlags struct {
	transport, addr string
	svcID           int
	session.Lifetime
}

func (o *fabricFlags) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.transport, "transport", results.TransportRDMA, "nvmet-rdma or nvmet-tcp: rdma or tcp")
	fs.StringVar(&o.addr, "addr", "", "the target's address (the server's data address)")
	fs.IntVar(&o.svcID, "svcid", nvmeof.DefaultSvcID, "the target's port")
	o.Lifetime.AddFlags(fs)
}

func (o *fabricFlags) check() error {
	ip := net.ParseIP(o.addr)
	switch {
	case o.transport != results.TransportRDMA && o.transport != results.TransportTCP:
		return usagef("--transport must be %s or %s (got %q)", results.TransportRDMA, results.TransportTCP, o.transport)
	case o.addr == "":
		return usagef("--addr is needed")
	case ip.To4() == nil:
		return usagef("--addr must be an IPv4 address (got %q)", o.addr)
	case ip.IsUnspecified():
		return usagef("--addr must be the server's own data address, not the wildcard %s", o.addr)
	case !o.ControlStdin:
		return usagef("--control-stdin is needed: the point's secret, which names the subsystem and keys its host, comes on the control line")
	}
	return nil
}

// start begins the command's lifetime: it reads the control line, and
// the returned context ends when stdin does (the runner's session gone,
// whatever killed it), at --deadline, or on SIGTERM; what the command set
// up is torn down then. SIGPIPE is ignored from here, so a teardown after
// the session is gone is not cut short by a write to its closed stdout.
func (o *fabricFlags) start(ctx context.Context, stdin io.Reader) (context.Context, func(), []byte, error) {
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop, secret, err := o.Lifetime.Start(ctx, stdin)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(secret) == 0 {
		stop()
		return nil, nil, nil, errors.New("the control line carries no secret: the point's secret names the subsystem and keys its host")
	}
	return ctx, stop, secret, nil
}

// runNVMet is node nvmet: load nvmet, make the target over the file (made
// and cached as node serve would, and held open: nvmet opens it through
// /proc/PID/fd, so what it exports is the file node checked), say ready,
// and tear it all down when the client proves it is done, or when the
// lifetime ends (see fabricFlags.start).
func runNVMet(ctx context.Context, e *env, args []string) error {
	var o fabricFlags
	var file, cache string
	var size sizeValue
	var create bool
	fs := flag.NewFlagSet("nvmet", flag.ContinueOnError)
	o.addFlags(fs)
	fs.StringVar(&file, "file", "", "the file the namespace reads")
	fs.Var(&size, "file-size", "its bytes, e.g. 64MiB")
	fs.BoolVar(&create, "create", false, "create or reuse a patterned file")
	fs.StringVar(&cache, "cache", "cold", "cold: the target reads the file directly (buffered_io 0); warm: through the warmed page cache")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	ctx, stop, secret, err := o.start(ctx, e.stdin)
	if err != nil {
		return err
	}
	defer stop()
	return session.StopReason(ctx, serveNVMet(ctx, e, &o, secret, &serveOptions{file: file, fileSize: size, create: create, cache: cache}))
}

// serveNVMet is node nvmet once its lifetime has begun.
func serveNVMet(ctx context.Context, e *env, o *fabricFlags, secret []byte, so *serveOptions) error {
	sys := nvmeof.Host
	if err := loadSay(ctx, e, sys, nvmeof.TargetModules(o.transport)); err != nil {
		return err
	}
	if mounted, err := sys.MountConfigfs(); err != nil {
		return err
	} else if mounted {
		e.out.Warn("mounted configfs on " + sys.Configfs)
	}
	f, _, err := prepareRegion(ctx, e.out, so)
	if err != nil {
		return err
	}
	defer f.Close() // after the teardown: the namespace holds the file till then
	if !f.Patterned {
		return fmt.Errorf("%s holds no pattern node made (its sidecar is missing), so the reads could not be checked; use server.create", so.file)
	}
	nqn, hostNQN := nvmeof.Names(secret)
	made, err := sys.Setup(ctx, nvmeof.Target{NQN: nqn, HostNQN: hostNQN, Transport: o.transport, Addr: o.addr, SvcID: o.svcID,
		Path: heldPath(f.File), Key: nvmeof.Key(secret), Buffered: so.cache == "warm", Serial: fmt.Sprintf("%016x", f.Seed)})
	if err != nil {
		return fmt.Errorf("make the target: %w", err)
	}
	defer func() {
		if err := sys.Teardown(made); err != nil {
			e.out.Warn("tear the target down: " + err.Error())
		}
	}()
	if !made.Auth {
		e.out.Warn("this kernel's nvmet has no in-band authentication (CONFIG_NVME_TARGET_AUTH): the subsystem admits its one host NQN without a DH-HMAC-CHAP key")
	}
	// node listens on the next TCP port, accepting the client's proof
	// that it is done: the runner waits for this role to exit, and the
	// kernel's target would never end by itself. The port listening is
	// its ready.
	l, err := net.Listen(results.Network, net.JoinHostPort(o.addr, strconv.Itoa(o.svcID+1)))
	if err != nil {
		return fmt.Errorf("listen on tcp port %d for the client's done: %w", o.svcID+1, err)
	}
	defer l.Close()
	e.out.Event(results.Ready{Type: results.TypeReady})
	fmt.Fprintf(e.stderr, "node: nvmet: a subsystem on %s %s:%d (port %d), namespace %s, buffered_io %v, DH-HMAC-CHAP %v\n",
		o.transport, o.addr, o.svcID, made.PortID, so.file, so.cache == "warm", made.Auth)
	return awaitDone(ctx, l, secret, doneGrace)
}

// heldPath is the path by which the kernel reaches the file f holds open:
// /proc/PID/fd/N names that very file whatever is done to its own path
// since node checked it.
func heldPath(f *os.File) string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd())
}

// doneTimeout bounds each connection to the done listener.
const doneTimeout = 5 * time.Second

// doneGrace is how long node nvmet keeps its target, once its lifetime
// has ended, for the client's done: both sides see the runner's session
// end at once, and a target removed under a live controller leaves that
// controller reconnecting to nothing, so the client deletes its
// controller first and then says done (see readNVMeOF). A client that
// never says so (killed, or its host lost) holds the teardown this long.
// It is under the runner's own grace before SIGTERM (2 s), and the runner
// waits as long again before SIGKILL, so the teardown still runs when the
// runner stops a point.
const doneGrace = 1500 * time.Millisecond

// awaitDone returns nil once a connection on l proves the point's secret
// for DoneRecord (results' challenge: a fresh nonce to each connection,
// the MAC back), or ctx.Err() when ctx ends first: then only once the
// client has proved it too, or after grace. Each connection is handled on
// its own, under doneTimeout, so a stranger's idle or wrong connection
// neither ends the point nor holds up the client's. It closes l.
func awaitDone(ctx context.Context, l net.Listener, secret []byte, grace time.Duration) error {
	defer l.Close()
	done, failed := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				failed <- err
				return
			}
			go func() {
				defer c.Close()
				if checkDone(c, secret) {
					once.Do(func() { close(done) })
				}
			}()
		}
	}()
	select {
	case <-done:
		return nil
	case err := <-failed:
		return fmt.Errorf("await the client's done: %w", err)
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-failed:
	case <-t.C:
	}
	return ctx.Err()
}

// checkDone challenges c and reports whether its answer proves secret.
func checkDone(c net.Conn, secret []byte) bool {
	c.SetDeadline(time.Now().Add(doneTimeout))
	nonce := make([]byte, results.NonceSize)
	if results.NewNonce(nonce) != nil {
		return false
	}
	if _, err := c.Write(nonce); err != nil {
		return false
	}
	mac := make([]byte, results.MACSize)
	if _, err := io.ReadFull(c, mac); err != nil {
		return false
	}
	return results.Admit(secret, nonce, nvmeof.DoneRecord, mac)
}

// sayDone proves to node nvmet at addr that this host is done.
func sayDone(ctx context.Context, addr string, port int, secret []byte) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, results.Network, net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("tell the target's node it is done: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(doneTimeout))
	nonce := make([]byte, results.NonceSize)
	if _, err := io.ReadFull(c, nonce); err != nil {
		return fmt.Errorf("tell the target's node it is done: read its challenge: %w", err)
	}
	if _, err := c.Write(results.Answer(secret, nonce, nvmeof.DoneRecord)); err != nil {
		return fmt.Errorf("tell the target's node it is done: %w", err)
	}
	// The target's node closes once it has checked the answer.
	_, _ = c.Read(make([]byte, 1))
	return nil
}

// loadSay loads mods and says which it loaded.
func loadSay(ctx context.Context, e *env, sys nvmeof.Sys, mods []string) error {
	loaded, err := sys.Load(ctx, mods)
	if len(loaded) > 0 {
		e.out.Warn("loaded kernel modules " + strings.Join(loaded, ", "))
	}
	return err
}

// nvmeofReadOptions are node nvmeof-read's flags.
type nvmeofReadOptions struct {
	fabricFlags
	blockSize, size, total sizeValue
	depth, qps             int
	pattern                string
	duration, warmup       durationFlag
	sample                 int
}

// runNVMeOFRead is node nvmeof-read: connect (proving the point's
// DH-HMAC-CHAP key), find the namespace and make it read-only here, run
// fio on it (io_uring, O_DIRECT), check a sample of blocks, disconnect,
// and prove to node nvmet that it is done. It prints a line
// {"type":"nvmeof_verified",...} and then fio's JSON. When its lifetime
// ends first (see fabricFlags.start), fio is killed and the controller
// deleted.
func runNVMeOFRead(ctx context.Context, e *env, args []string) error {
	var o nvmeofReadOptions
	fs := flag.NewFlagSet("nvmeof-read", flag.ContinueOnError)
	o.addFlags(fs)
	fs.Var(&o.blockSize, "block-size", "fio's --bs")
	fs.Var(&o.size, "size", "bytes of the namespace read (the plan's file_size)")
	fs.Var(&o.total, "total", "bytes to read (0: --size) when no --duration")
	fs.IntVar(&o.depth, "queue-depth", 1, "reads in flight in total, spread evenly over the --qps jobs")
	fs.IntVar(&o.qps, "qps", 1, "I/O queues (nr_io_queues), each read by its own fio job over its own range of the namespace")
	fs.StringVar(&o.pattern, "pattern", "sequential", "sequential or random")
	fs.Var(&o.duration, "duration", "time-based: how long fio reads")
	fs.Var(&o.warmup, "warmup", "fio's --ramp_time")
	fs.IntVar(&o.sample, "verify-sample", 64, "blocks checked against the file's pattern after fio")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if o.blockSize <= 0 || o.size < o.blockSize {
		return usagef("--block-size must be positive and fit in --size")
	}
	if o.qps < 1 || o.qps > maxNVMeOFQueues || jobShare(int64(o.size), o.qps, int64(o.blockSize)) == 0 {
		return usagef("--qps must be 1 to %d, each job's range of --size holding a block (got %d)", maxNVMeOFQueues, o.qps)
	}
	ctx, stop, secret, err := o.start(ctx, e.stdin)
	if err != nil {
		return err
	}
	defer stop()
	return session.StopReason(ctx, readNVMeOF(ctx, e, &o, secret))
}

// readNVMeOF is node nvmeof-read once its lifetime has begun.
func readNVMeOF(ctx context.Context, e *env, o *nvmeofReadOptions, secret []byte) error {
	sys := nvmeof.Host
	if err := loadSay(ctx, e, sys, nvmeof.HostModules(o.transport)); err != nil {
		return err
	}
	nqn, hostNQN := nvmeof.Names(secret)
	made, err := sys.Connect(ctx, nvmeof.Conn{NQN: nqn, HostNQN: hostNQN, HostID: nvmeof.HostID(secret), Transport: o.transport, Addr: o.addr, SvcID: o.svcID,
		Key: nvmeof.Key(secret), IOQueues: o.qps, QueueSize: nvmeof.QueueSize(results.DepthPerQP(o.depth, o.qps))})
	if made == nil {
		return err
	}
	// The end, once, whoever reaches it first (the point's end, an error,
	// the lifetime's end): the controller deleted, then node nvmet told,
	// so that it removes the target only once no controller of ours is
	// connected to it (see doneGrace). A later caller waits for it, so
	// node never exits halfway through.
	end := sync.OnceValue(func() error {
		if err := sys.Disconnect(made); err != nil {
			return err
		}
		limit := doneTimeout
		if ctx.Err() != nil {
			limit = doneGrace // node nvmet waits no longer
		}
		tell, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
		defer cancel()
		return sayDone(tell, o.addr, o.svcID+1, secret)
	})
	returned := false // the point's end returns end's error itself
	defer func() {
		if err := end(); err != nil && !returned {
			e.out.Warn(err.Error())
		}
	}()
	if err != nil {
		return err
	}
	// When the lifetime ends the controller goes at once: a killed fio
	// cannot exit while its reads wait on a target that went first (the
	// kernel retries them for ctrl_loss_tmo), and deleting the controller
	// fails them.
	defer context.AfterFunc(ctx, func() { end() })()
	serial, err := sys.Controller(made)
	if err != nil {
		return err
	}
	seed, err := strconv.ParseUint(serial, 16, 64)
	if err != nil {
		return fmt.Errorf("controller %s: serial %q is not the target's pattern seed", made.Controller, serial)
	}
	dev, err := sys.Namespace(ctx, made, 1, 10*time.Second)
	if err != nil {
		return err
	}
	if err := nvmeof.ReadOnly(dev); err != nil {
		return err
	}
	report, err := runFio(ctx, *o, dev)
	if err != nil {
		return err
	}
	n, err := verifySample(dev, int64(o.blockSize), int64(o.size), o.sample, seed)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", dev, made.Controller, err)
	}
	returned = true
	if err := end(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "{\"type\":\"nvmeof_verified\",\"blocks\":%d,\"block_size\":%d}\n", n, o.blockSize)
	_, err = e.stdout.Write(report)
	return err
}

// fioWaitDelay bounds node's wait for fio's output once fio is killed.
const fioWaitDelay = 2 * time.Second

// maxNVMeOFQueues bounds --qps: node connects at most 1024 QPs, and
// nvme-fabrics makes at most one I/O queue per CPU.
const maxNVMeOFQueues = 1024

// jobShare is each of jobs' range of size bytes, in whole blocks of bs;
// 0 when a share holds no block.
func jobShare(size int64, jobs int, bs int64) int64 {
	return size / int64(max(jobs, 1)) / bs * bs
}

// fioArgs are fio's arguments for o on dev: one job per queue (--qps),
// each over its own range of the namespace (--offset_increment) at its
// share of the depth, the total shared alike, reported as one.
func fioArgs(o nvmeofReadOptions, dev string) []string {
	rw := "read"
	if o.pattern == "random" {
		rw = "randread"
	}
	jobs, bs := max(o.qps, 1), int64(o.blockSize)
	size, total := int64(o.size), int64(o.total)
	if jobs > 1 {
		size = jobShare(size, jobs, bs)
		total = max(total/int64(jobs)/bs, 1) * bs
	}
	// --thread: fio's job is a thread of the one process that node kills
	// (and Pdeathsig reaches), not a forked child; a job process outlived
	// its SIGKILLed parent, kept the namespace busy and the output pipe
	// open, and node waited on that pipe for good (KillRunner under load).
	args := []string{"--name=rdmasweep", "--thread", "--filename=" + dev, "--readonly", "--direct=1", "--ioengine=io_uring", "--rw=" + rw,
		"--bs=" + strconv.FormatInt(bs, 10), "--iodepth=" + strconv.Itoa(results.DepthPerQP(o.depth, jobs)), "--size=" + strconv.FormatInt(size, 10)}
	if jobs > 1 {
		args = append(args, "--numjobs="+strconv.Itoa(jobs), "--offset_increment="+strconv.FormatInt(size, 10), "--group_reporting")
	}
	if d := o.duration.d(); d > 0 {
		args = append(args, fmt.Sprintf("--runtime=%dms", d.Milliseconds()), "--time_based")
	} else if o.total > 0 {
		args = append(args, "--io_size="+strconv.FormatInt(total, 10))
	}
	if w := o.warmup.d(); w > 0 {
		args = append(args, fmt.Sprintf("--ramp_time=%dms", w.Milliseconds()))
	}
	return append(args, "--lat_percentiles=1", "--output-format=json")
}

// runFio runs fio on dev and returns its JSON report.
func runFio(ctx context.Context, o nvmeofReadOptions, dev string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "fio", fioArgs(o, dev)...)
	// fio dies with node, however node dies: a fio left reading would
	// hold the controller the teardown deletes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Once fio is killed, its output pipes are not waited on for longer
	// than this, whoever else holds them.
	cmd.WaitDelay = fioWaitDelay
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("fio on %s: %w: %s", dev, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// verifySample reads n blocks of dev, the first, the last and the rest at
// random, with O_DIRECT (past any cache on this host), and checks each
// against the pattern for seed. A mismatch names its offset.
func verifySample(dev string, block, size int64, n int, seed uint64) (int, error) {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return 0, fmt.Errorf("open to check a sample: %w", err)
	}
	defer f.Close()
	blocks := size / block
	buf, err := unix.Mmap(-1, 0, int(block), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // page-aligned
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(buf)
	n = int(min(int64(n), blocks))
	for i := range n {
		b := rand.Int64N(blocks)
		switch i {
		case 0:
			b = 0
		case 1:
			b = blocks - 1
		}
		off := b * block
		if _, err := f.ReadAt(buf, off); err != nil {
			return i, fmt.Errorf("read the block at offset %d to check it: %w", off, err)
		}
		if bad, ok := pattern.Check(buf, off, seed); !ok {
			return i, fmt.Errorf("%w: the block at offset %d differs from the file's pattern at byte offset %d", errVerify, off, bad)
		}
	}
	return n, nil
}

var errVerify = errors.New("data mismatch")

// runNVMeOFClean is node nvmeof-clean: remove what node nvmet and node
// nvmeof-read recorded making on this host and left behind when they were
// killed (their process is gone), and nothing else. It prints one line
// per subsystem or controller removed.
func runNVMeOFClean(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("nvmeof-clean", flag.ContinueOnError)
	nqn := fs.String("nqn", "", "only this subsystem's records")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	done, err := nvmeof.Host.Clean(ctx, *nqn)
	for _, d := range done {
		fmt.Fprintln(e.stdout, "removed "+d)
	}
	return err
}
