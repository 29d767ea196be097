package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"rdmasweep/node/session"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

const defaultAccept = time.Minute

// durationFlag is a time.Duration flag whose default can be set before
// registration without a pointer dance.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(v string) error {
	x, err := time.ParseDuration(v)
	*d = durationFlag(x)
	return err
}

func (d durationFlag) d() time.Duration { return time.Duration(d) }

// roleFlags are the flags serve and read share.
type roleFlags struct {
	transport string
	format    string
	rdma      transport.RDMA
	fabric    transport.Fabric
	session.Lifetime
}

// addFlags registers them. The RDMA flags are accepted by tcp too, and
// ignored, so the runner can build one argv for both.
func (f *roleFlags) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.transport, "transport", results.TransportTCP, "tcp or rdma")
	fs.StringVar(&f.format, "format", "json", "stdout format: json or text")
	f.Lifetime.AddFlags(fs)
	r := &f.rdma
	fs.StringVar(&r.Device, "rdma-device", "", "RDMA device (default: the one whose interface holds the address in use)")
	fs.IntVar(&r.IBPort, "ib-port", 0, "RDMA port, 1-based (0: the port holding the address, or 1)")
	fs.IntVar(&r.GIDIndex, "gid-index", -1, "GID index (-1: pick from the address in use; given on InfiniBand, the QPs carry a GRH)")
	fs.StringVar(&r.Connect, "rdma-connect", results.ConnectTCP, "how QPs connect: tcp (node's exchange) or cm (rdma_cm, needed for iWARP)")
	f.fabric = transport.DefaultFabric()
	d := f.fabric
	fs.IntVar(&f.fabric.TrafficClass, "traffic-class", d.TrafficClass, "GRH traffic class (RoCE DSCP<<2|ECN); set it on both roles (-1: unset, the port's default)")
	fs.IntVar(&f.fabric.ServiceLevel, "service-level", d.ServiceLevel, "InfiniBand service level")
	fs.IntVar(&f.fabric.PKeyIndex, "pkey-index", d.PKeyIndex, "P_Key table index")
	fs.IntVar(&f.fabric.Timeout, "qp-timeout", d.Timeout, "QP local ACK timeout, 4.096us × 2^N")
	fs.IntVar(&f.fabric.RetryCnt, "retry-cnt", d.RetryCnt, "QP transport retries")
	fs.IntVar(&f.fabric.RNRRetry, "rnr-retry", d.RNRRetry, "QP RNR retries (7: forever)")
	fs.IntVar(&f.fabric.MinRNRTimer, "min-rnr-timer", d.MinRNRTimer, "QP minimum RNR NAK timer code")
	r.Fabric = &f.fabric
}

func checkFormat(f string) error {
	if f != "json" && f != "text" {
		return usagef("--format must be json or text (got %q)", f)
	}
	return nil
}

// roleCommand is a subcommand that runs one role: serve or read.
type roleCommand interface {
	addFlags(fs *flag.FlagSet)
	// paramRole is the role whose parameters' flags it takes, as the
	// schema names it: "serve" or "read".
	paramRole() string
	// check checks what the schema does not say: required flags and how
	// flags combine.
	check() error
	flags() *roleFlags
}

func (f *roleFlags) flags() *roleFlags { return f }

// runRole is what serve and read share: parse and check the flags, print
// started before any slow work, then run body within the lifetime
// (--deadline, --control-stdin) and turn why it stopped into its error.
func runRole(ctx context.Context, e *env, role string, o roleCommand, args []string, body func(ctx context.Context, tr transport.Transport, secret []byte) error) error {
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	o.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f := o.flags()
	if err := checkParamFlags(fs, role, o.paramRole(), f.transport); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	e.out = session.NewPrinter(e.stdout, e.stderr, f.format)
	tr, err := lookupTransport(f.transport)
	if err != nil {
		return err
	}
	e.out.Event(started(role))
	ctx, stop, secret, err := f.Lifetime.Start(ctx, e.stdin)
	if err != nil {
		return err
	}
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	go exitIfStuck(ctx, e, finished)
	return session.StopReason(ctx, body(ctx, tr, secret))
}

// stuckGrace is how long a role may take to return once its lifetime has
// ended (stdin closed, deadline, signal) before exitIfStuck ends it.
const stuckGrace = time.Second

// hardExit ends the process when a stopped role is stuck; main sets it to
// os.Exit. It is nil in tests that call run in-process, and then
// exitIfStuck only waits.
var hardExit func(code int)

// exitIfStuck keeps the promise that node stops on stdin EOF or at its
// deadline even when the role is blocked in a system call that no context
// reaches, such as open(2) of a FIFO that no one writes. Cleanup that the
// kernel does on exit anyway (munmap, deregistering the memory region) is
// not worth waiting longer for.
func exitIfStuck(ctx context.Context, e *env, finished <-chan struct{}) {
	select {
	case <-finished:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(stuckGrace)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		if hardExit != nil {
			e.out.Error(fmt.Errorf("%w; still busy %v later, likely blocked in a system call: exiting", context.Cause(ctx), stuckGrace))
			hardExit(1)
		}
	}
}
