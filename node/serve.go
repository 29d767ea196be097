package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/counters"
	"rdmasweep/node/procstat"
	"rdmasweep/node/region"
	"rdmasweep/node/session"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

type serveOptions struct {
	roleFlags
	file          string
	fileSize      sizeValue
	create        bool
	cache         string
	populate      string
	pipeline      bool
	window        int
	io            string
	registration  string
	mrSize        sizeValue
	listen        string
	port          int
	acceptTimeout durationFlag
	clients       int
}

func (o *serveOptions) addFlags(fs *flag.FlagSet) {
	o.roleFlags.addFlags(fs)
	fs.StringVar(&o.file, "file", "", "file whose first --file-size bytes are served")
	fs.Var(&o.fileSize, "file-size", "bytes to serve, e.g. 4GiB")
	fs.BoolVar(&o.create, "create", false, "create or reuse a patterned file (never overwrites a file node did not make)")
	fs.StringVar(&o.cache, "cache", "cold", "page cache before serving: cold or warm")
	fs.StringVar(&o.populate, "populate", results.PopulateFault, "bring the file into memory before ready: fault (the registration or the reads fault it in) or parallel (readers over disjoint ranges, timed; node prepare ignores it)")
	fs.BoolVar(&o.pipeline, "pipeline", false, "rdma: populate and register the file one --mr-size region at a time after the client connects, announcing each as it is ready")
	fs.IntVar(&o.window, "window", 0, "rdma, with --pipeline: keep at most this many memory regions registered, each deregistered once the client has read it (0: all stay)")
	fs.StringVar(&o.io, "io", results.IOMmap, "how the file is read: mmap (through the page cache) or direct (one pass with O_DIRECT into a ring of --window (4 when 0) buffers: rdma's of --mr-size, registered once; tcp's of 16 MiB)")
	fs.StringVar(&o.registration, "registration", "pinned", "RDMA memory registration: pinned or odp")
	fs.Var(&o.mrSize, "mr-size", "register the file as RDMA memory regions of at most this size, e.g. 32MiB (default: one region)")
	fs.StringVar(&o.listen, "listen", "", "address to listen on (default: all addresses, with a warning)")
	fs.IntVar(&o.port, "port", 0, "port to listen on (0: a free one)")
	o.acceptTimeout = durationFlag(defaultAccept)
	fs.Var(&o.acceptTimeout, "accept-timeout", "how long to wait for the client")
	fs.IntVar(&o.clients, "clients", 1, "serve this many clients at once, all reading the one region (fan-in)")
	fs.BoolVar(&o.rdma.ODPPrefetch, "odp-prefetch", false, "with --registration odp, prefetch the region (ibv_advise_mr) before ready")
}

func (o *serveOptions) paramRole() string { return "serve" }

// check checks what checkParamFlags does not: the schema bounds each
// parameter's flag (file size, cache, registration, port, the RDMA and
// fabric fields) before it runs.
func (o *serveOptions) check() error {
	switch {
	case o.file == "":
		return usagef("serve: --file is required")
	case o.acceptTimeout <= 0:
		return usagef("serve: --accept-timeout must be positive")
	case o.clients < 1 || o.clients > maxClients:
		return usagef("serve: --clients must be between 1 and %d (got %d)", maxClients, o.clients)
	case o.rdma.ODPPrefetch && o.registration != "odp":
		return usagef("serve: --odp-prefetch needs --registration odp")
	case o.pipeline && o.transport != results.TransportRDMA:
		return usagef("serve: --pipeline is rdma's: tcp's sendfile already reads the disk as it sends")
	case o.pipeline && o.registration == "odp":
		return usagef("serve: --pipeline registers the file region by region; with --registration odp nothing is registered ahead of the reads: use pinned")
	case o.pipeline && o.clients > 1:
		return usagef("serve: --pipeline serves one client (--clients 1)")
	case o.window > 0 && !o.pipeline && o.io != results.IODirect:
		return usagef("serve: --window bounds a pipelined server's memory regions, or --io direct's ring: add --pipeline or --io direct")
	case o.io == results.IODirect && o.pipeline:
		return usagef("serve: --io direct streams the file through its own ring: drop --pipeline")
	case o.io == results.IODirect && o.registration == "odp":
		return usagef("serve: --io direct registers its ring once, pinned: use --registration pinned")
	case o.io == results.IODirect && o.transport == results.TransportRDMA && (o.mrSize == 0 || o.mrSize%4096 != 0):
		return usagef("serve: --io direct reads the file into buffers of --mr-size, a whole number of 4KiB pages (got %d)", int64(o.mrSize))
	case o.io == results.IODirect && o.clients > 1:
		return usagef("serve: --io direct serves one client (--clients 1)")
	}
	return checkFormat(o.format)
}

func runServe(ctx context.Context, e *env, args []string) error {
	var o serveOptions
	return runRole(ctx, e, "serve", &o, args, func(ctx context.Context, tr transport.Transport, secret []byte) error {
		if err := needSecret(e, &o, secret); err != nil {
			return err
		}
		return serve(ctx, e.out, tr, &o, secret)
	})
}

// needSecret refuses to serve without a secret unless the user chose
// that by starting node serve by hand without --control-stdin, and then
// warns. A command line that came through node attach, or a control line
// that carries no secret, is not a user's choice: whoever sent it would
// have the region served to any client that reaches the port.
func needSecret(e *env, o *serveOptions, secret []byte) error {
	switch {
	case secret != nil:
		return nil
	case e.attached:
		return errors.New("serve: no secret: under node attach the first control line must carry the point's secret (\"secret\"); nothing is served without one")
	case o.ControlStdin:
		return errors.New("serve: no secret: the first control line on stdin carries none (\"secret\"); without --control-stdin node serves without a secret, and warns")
	}
	e.out.Warn("serving without a secret (no --control-stdin): any client that reaches the port can read the region")
	return nil
}

func serve(ctx context.Context, out *session.Printer, tr transport.Transport, o *serveOptions, secret []byte) error {
	if o.listen == "" {
		out.Warn("no --listen: listening on all addresses")
	}
	f, cached, err := prepareRegion(ctx, out, o)
	if err != nil {
		return err
	}
	defer f.Close()
	if !f.Patterned {
		out.Warn(fmt.Sprintf("%s has no rdmasweep sidecar: its bytes cannot be verified", o.file))
	}
	sample := counters.NewSample("")
	// The disk's watcher ends with serve, whether or not the sample does:
	// an agent serves many points in one process.
	diskCtx, stopDisk := context.WithCancel(ctx)
	defer stopDisk()
	sample.Disk(diskCtx, f.Path) // the cache state is set: every read from here is the point's
	prepDisk, prepCPU := sample.DiskMark(), transport.StartCPU()
	var populateS *float64
	var populateRegion func(context.Context, []int64, func(context.Context, int) error, func(int, region.RegionTimes)) (region.Stream, error)
	if o.pipeline {
		// The file is populated and registered region by region after
		// the client connects, inside its read.
		if o.populate == results.PopulateParallel {
			populateRegion = func(ctx context.Context, sizes []int64, admit func(context.Context, int) error, ready func(int, region.RegionTimes)) (region.Stream, error) {
				return f.PopulateStream(ctx, sizes, region.PopulateReaders, admit, ready)
			}
		}
	} else if o.io == results.IODirect {
		// The server reads the file itself, off the page cache, as the
		// client reads it.
	} else if populateS, err = populate(ctx, f, o.populate); err != nil {
		return err
	}
	srv, err := tr.Listen(ctx, transport.ServerConfig{
		Region:        transport.Region{File: f.File, Path: f.Path, Size: f.Size, Seed: f.Seed, Patterned: f.Patterned, Writable: f.Writable},
		Host:          o.listen,
		Port:          o.port,
		AcceptTimeout: o.acceptTimeout.d(),
		Secret:        secret,
		Registration:  o.registration,
		MRSize:        int64(o.mrSize),
		RDMA:          o.rdma,
		Pipeline:      o.pipeline,
		Window:        o.window,
		IO:            o.io,
		Populate:      populateRegion,
	}, out.Warn)
	if err != nil {
		return err
	}
	defer srv.Close()
	prep := preparation(prepDisk, prepCPU())
	info := srv.Ready()
	beginServer(sample, info) // before ready: a client may start at once
	rate, rateUnknown, mtu := lineRate(info)
	out.Event(results.Ready{
		Prep:        prep,
		LineRateMBs: rate, LineRateUnknown: rateUnknown, LineMTU: mtu,
		Type: results.TypeReady, Transport: tr.Name(), Address: info.Address, Port: info.Port,
		RegistrationS: info.RegistrationS, RegistrationMBs: info.RegistrationMBs,
		CachedFraction: cached, Mapping: info.Mapping, Regions: info.Regions, GIDIndex: info.GIDIndex, FileCreated: f.Created,
		PrefetchS: info.PrefetchS, RDMAPath: info.Path,
		PopulateS: populateS, PopulateMBs: rateOf(f.Size, populateS),
	})
	out.Line("listening on %s port %d (cached %.0f%%)", info.Address, info.Port, cached*100)
	before := faults()
	mark := sample.DiskMark() // the preparation's reads are behind it
	st, conns, err := serveAll(ctx, srv, o.clients)
	if err != nil {
		return err
	}
	after := faults()
	c := sample.End(st.TCP)
	if n, ok := mark.Since(); ok && st.Seconds > 0 {
		mbs := float64(n) / st.Seconds / 1e6
		c.DiskReadMBs = &mbs
	}
	out.Event(results.Done{
		Type: results.TypeDone, BytesServed: st.BytesServed, Requests: st.Requests, Seconds: st.Seconds,
		MinorFaults: after.minor - before.minor, MajorFaults: after.major - before.major,
		CPUUserS: st.CPU.UserS, CPUSysS: st.CPU.SysS, CPUWallS: st.CPU.WallS, CPUThreadS: st.CPU.ThreadS, Connections: conns,
		Counters: c, Pipeline: st.Pipeline, PinnedPeakBytes: st.PinnedPeakBytes,
	})
	out.Line("served %d bytes in %d requests in %.3f s", st.BytesServed, st.Requests, st.Seconds)
	return srv.Close()
}

// preparation is what the server's preparation before ready (populate,
// then the registration) used: its time, its disk's rate against the
// mark taken at its start, and its busiest thread. nil when nothing was
// timed; the disk's rate is absent without a disk.
func preparation(mark counters.DiskMark, cpu transport.CPUTime) *results.Prep {
	if cpu.WallS <= 0 {
		return nil
	}
	p := &results.Prep{Seconds: cpu.WallS}
	if n, ok := mark.Since(); ok {
		mbs := float64(n) / cpu.WallS / 1e6
		p.DiskReadMBs = &mbs
	}
	if cpu.ThreadS > 0 {
		th := cpu.ThreadS / cpu.WallS
		p.CPUThread = &th
	}
	return p
}

// populate brings f into the page cache before it is registered or
// served when how is parallel, and returns how long that took; nil for
// fault, where the registration or the reads fault it in.
func populate(ctx context.Context, f *region.File, how string) (*float64, error) {
	if how != results.PopulateParallel {
		return nil, nil
	}
	d, err := f.Populate(ctx, region.PopulateReaders)
	if err != nil {
		return nil, err
	}
	secs := d.Seconds()
	return &secs, nil
}

// rateOf is size bytes over *secs in MB/s, nil without a time.
func rateOf(size int64, secs *float64) *float64 {
	if secs == nil || *secs <= 0 {
		return nil
	}
	mbs := float64(size) / 1e6 / *secs
	return &mbs
}

// prepareRegion opens (or creates) the file and puts its pages in the
// state the cache mode asks for, and reports the share of them in the
// page cache after that step. serve and prepare share it, so a peer that
// reads the file (fio) starts from exactly the state node serve would.
func prepareRegion(ctx context.Context, out *session.Printer, o *serveOptions) (*region.File, float64, error) {
	f, err := region.Open(ctx, o.file, region.Options{Size: int64(o.fileSize), Create: o.create, Writable: o.transport == results.TransportRDMA})
	if err != nil {
		return nil, 0, err
	}
	switch o.cache {
	case "cold":
		err = f.DropCache()
	case "warm":
		err = f.Warm()
	}
	var cached float64
	if err == nil {
		cached, err = f.Residency()
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if o.cache == "cold" && cached > 0.5 {
		out.Warn(fmt.Sprintf("cache cold asked, but %.0f%% of %s stays in memory after dropping it (tmpfs?): reads will not touch the disk", cached*100, o.file))
	}
	return f, cached, nil
}

// runPrepare is node prepare: serve's preparation of the file (create it
// if asked, then the cold or warm step) and nothing else. It takes serve's
// flags, prints started, then a ready event with no address (nothing
// listens) and exits: the runner runs it before a peer that reads the file
// itself (fio), so the peer finds the file node would serve, in the cache
// state node would serve it from.
func runPrepare(ctx context.Context, e *env, args []string) error {
	var o serveOptions
	return runRole(ctx, e, "prepare", &o, args, func(ctx context.Context, tr transport.Transport, secret []byte) error {
		f, cached, err := prepareRegion(ctx, e.out, &o)
		if err != nil {
			return err
		}
		defer f.Close()
		e.out.Event(results.Ready{Type: results.TypeReady, CachedFraction: cached, FileCreated: f.Created})
		e.out.Line("prepared %s (cached %.0f%%)", o.file, cached*100)
		return f.Close()
	})
}

// maxClients bounds --clients: each client holds a connection, and with
// rdma a QP set, on the server.
const maxClients = 1024

// serveAll serves n clients at once, one Serve call each, and returns
// their totals, each one's session when there are several, and the first
// failure. One client failing stops the others: the point has failed.
func serveAll(ctx context.Context, srv transport.Server, n int) (transport.ServeStats, []results.Connection, error) {
	if n == 1 {
		st, err := srv.Serve(ctx)
		return st, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu    sync.Mutex
		total transport.ServeStats
		conns []results.Connection
		first time.Time
		wg    sync.WaitGroup
	)
	cpu := transport.StartCPU() // waiting for the clients costs no CPU
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := srv.Serve(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				cancel(err)
				return
			}
			end := time.Now()
			if began := end.Add(-time.Duration(st.Seconds * float64(time.Second))); first.IsZero() || began.Before(first) {
				first = began
			}
			total.BytesServed += st.BytesServed
			total.Requests += st.Requests
			total.TCP = addTCP(total.TCP, st.TCP)
			total.Seconds = end.Sub(first).Seconds()
			conns = append(conns, results.Connection{BytesServed: st.BytesServed, Requests: st.Requests, Seconds: st.Seconds})
		}()
	}
	wg.Wait()
	total.CPU = cpu()
	total.CPU.WallS = total.Seconds // their sessions, not the wait for them
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return total, conns, err
	}
	return total, conns, ctx.Err()
}

type faultCount struct{ minor, major int64 }

// faults returns the process's page faults so far.
func faults() faultCount {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return faultCount{}
	}
	return faultCount{minor: ru.Minflt, major: ru.Majflt}
}

func started(role string) results.Started {
	st := results.Started{Type: results.TypeStarted, PID: unix.Getpid(), PGID: unix.Getpgrp(), Role: role, Version: version}
	// Two small procfs reads, so the runner needs no round trip of its
	// own to record what identifies this process.
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		st.BootID = strings.TrimSpace(string(b))
	}
	st.StartTime = procstat.StartTime(st.PID)
	return st
}
