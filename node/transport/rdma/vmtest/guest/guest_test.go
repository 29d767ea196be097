//go:build rdmaguest

package guest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/transport"
	"rdmasweep/node/transport/rdma"
	"rdmasweep/node/transport/transporttest"
	"rdmasweep/results"
)

// The guest's addresses (see GuestIP… in testbed/guest): rxe0 on eth0, rxe1 on
// eth1, siw0 on eth2 when the kernel has siw.
const (
	guestIP  = "10.0.2.15"
	guestIP1 = "10.0.3.15"
	guestIP2 = "10.0.4.15"
)

// kernel is the guest's kernel release.
func kernel(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// devices is what node devices --json lists.
func devices(t *testing.T) []rdma.Device {
	t.Helper()
	out, err := exec.Command(nodeBin(t), "devices", "--json").Output()
	if err != nil {
		t.Fatalf("node devices --json: %v", err)
	}
	var l struct {
		Devices []rdma.Device `json:"devices"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("node devices --json printed %q: %v", out, err)
	}
	return l.Devices
}

func device(t *testing.T, name string) *rdma.Device {
	for _, d := range devices(t) {
		if d.Name == name {
			return &d
		}
	}
	return nil
}

// needSiw fails unless the guest has siw0. Nothing here skips: the host
// leaves the siw tests out (-test.skip) of a guest whose image has no siw.
func needSiw(t *testing.T) {
	t.Helper()
	if device(t, "siw0") == nil {
		t.Fatalf("node devices lists no siw0 (kernel %s)", kernel(t))
	}
}

// readArgs are node read's arguments against a server on ip:port.
func readArgs(ip string, port int, extra ...string) []string {
	return append([]string{"read", "--transport", "rdma", "--server", fmt.Sprintf("%s:%d", ip, port)}, extra...)
}

// point runs one serve and one read with the given extra arguments and
// returns both sides' events, failing on an error.
func point(t *testing.T, secret string, serve, read []string) (*results.Ready, *results.Result, *results.Done) {
	t.Helper()
	srv := start(t, secret, serve...)
	ready := until[results.Ready](t, srv, "ready")
	ip := ready.Address
	cl := start(t, secret, readArgs(ip, ready.Port, read...)...)
	res := until[results.Result](t, cl, "result")
	finish(t, cl)
	done := until[results.Done](t, srv, "done")
	finish(t, srv)
	return ready, res, done
}

func nodeBin(t *testing.T) string {
	p := os.Getenv("NODE")
	if p == "" {
		p = "/vmtest/node"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no node binary: %v (set NODE)", err)
	}
	return p
}

// proc is a running node whose stdout events are decoded as they come.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan any
	stderr strings.Builder
	done   chan error
}

func start(t *testing.T, secret string, args ...string) *proc {
	t.Helper()
	return launch(t, secret, nil, nodeBin(t), args...)
}

// launch starts name with args (node, or a wrapper that execs it), its
// events decoded as start's are; prepare, if set, adjusts the command.
func launch(t *testing.T, secret string, prepare func(*exec.Cmd), name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p := &proc{cmd: exec.CommandContext(ctx, name, args...), events: make(chan any, 64), done: make(chan error, 1)}
	if prepare != nil {
		prepare(p.cmd)
	}
	if secret != "" {
		p.cmd.Args = append(p.cmd.Args, "--control-stdin")
	}
	p.cmd.Stderr = &p.stderr
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		fmt.Fprintf(p.stdin, `{"secret":%q}`+"\n", secret)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, results.MaxEventLine), results.MaxEventLine)
		for sc.Scan() {
			ev, err := results.Decode(sc.Bytes())
			if err != nil {
				ev = fmt.Errorf("stdout line %q: %w", sc.Text(), err)
			}
			p.events <- ev
		}
		close(p.events)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// until returns the first event of type T, failing on an error event or
// the end of output.
func until[T any](t *testing.T, p *proc, what string) *T {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				t.Fatalf("%s: node exited before its %s event; stderr:\n%s", p.cmd.Args[1], what, p.stderr.String())
			}
			switch e := ev.(type) {
			case *T:
				return e
			case *results.Error:
				t.Fatalf("%s: error event before %s: %s", p.cmd.Args[1], what, e.Message)
			case error:
				t.Fatal(e)
			}
		case <-timeout:
			t.Fatalf("%s: no %s event within 2 minutes", p.cmd.Args[1], what)
		}
	}
}

// failure waits for node to fail and returns its error event's message.
func failure(t *testing.T, p *proc) string {
	t.Helper()
	var msg string
	for ev := range p.events {
		if e, ok := ev.(*results.Error); ok {
			msg = e.Message
		}
	}
	err := <-p.done
	if err == nil {
		t.Fatalf("%s exited 0, want a failure", strings.Join(p.cmd.Args, " "))
	}
	if msg == "" {
		t.Fatalf("%s failed (%v) without an error event", strings.Join(p.cmd.Args, " "), err)
	}
	return msg
}

// failureCode is failure, with the error event's code.
func failureCode(t *testing.T, p *proc) (string, string) {
	t.Helper()
	var msg, code string
	for ev := range p.events {
		if e, ok := ev.(*results.Error); ok {
			msg, code = e.Message, e.Code
		}
	}
	err := <-p.done
	if err == nil || msg == "" {
		t.Fatalf("%s: exit %v, error %q; want a failure with an error event", strings.Join(p.cmd.Args, " "), err, msg)
	}
	return msg, code
}

func finish(t *testing.T, p *proc) {
	t.Helper()
	for range p.events {
	}
	p.stdin.Close()
	if err := <-p.done; err != nil {
		t.Fatalf("%s: %v; stderr:\n%s", strings.Join(p.cmd.Args, " "), err, p.stderr.String())
	}
}

func serveArgs(t *testing.T, size string, extra ...string) []string {
	return append([]string{"serve", "--transport", "rdma", "--file", filepath.Join(t.TempDir(), "region.dat"),
		"--file-size", size, "--create", "--cache", "warm", "--listen", guestIP, "--accept-timeout", "60s"}, extra...)
}

func TestDevices(t *testing.T) {
	t.Logf("kernel %s", kernel(t))
	devs := devices(t)
	byName := map[string]*rdma.Device{}
	for i := range devs {
		byName[devs[i].Name] = &devs[i]
	}
	for _, c := range []struct{ dev, ip, netdev string }{{"rxe0", guestIP, "eth0"}, {"rxe1", guestIP1, "eth1"}} {
		rxe := byName[c.dev]
		if rxe == nil || len(rxe.Ports) != 1 {
			t.Fatalf("the static node does not list %s with one port: %+v", c.dev, devs)
		}
		p := rxe.Ports[0]
		if p.State != "ACTIVE" || p.LinkLayer != "Ethernet" || p.ActiveMTU < 1024 || p.MaxMsgSz <= 0 {
			t.Errorf("%s port: %+v, want active Ethernet with an MTU and a max_msg_sz", c.dev, p)
		}
		if rxe.MaxQPRdAtom <= 1 || rxe.MaxQPInitRdAtom <= 1 || rxe.MaxQPWR < 64 || rxe.Transport != "InfiniBand" || rxe.Error != "" || rxe.Unsupported != "" {
			t.Errorf("%s: %+v; want depths > 1, max_qp_wr >= 64, transport InfiniBand (RoCE), no error", c.dev, rxe)
		}
		if strings.HasPrefix(kernel(t), "6.1.") && rxe.ODP {
			t.Errorf("%s advertises odp on 6.1", c.dev)
		}
		found := false
		for _, g := range p.GIDs {
			found = found || (g.GID == "::ffff:"+c.ip && g.Type == "RoCE v2" && g.Netdev == c.netdev)
		}
		if !found {
			t.Errorf("no RoCE v2 GID ::ffff:%s on %s among %+v", c.ip, c.netdev, p.GIDs)
		}
	}
	if siw := byName["siw0"]; siw != nil {
		if siw.Transport != "iWARP" || len(siw.Ports) != 1 || siw.Ports[0].State != "ACTIVE" {
			t.Errorf("siw0: %+v, want an ACTIVE iWARP device", siw)
		}
	}
	// A soft device's line rate is its netdev's speed, whatever rate the
	// kernel makes up: qemu tells eth0 and eth2 10 Gb/s and eth1 nothing
	// (-1). siw0's GIDs name no netdev; RDMA netlink does.
	for dev, want := range map[string]string{"rxe0": "1250", "rxe1": "eth1: speed is -1", "siw0": "1250"} {
		if byName[dev] == nil || len(byName[dev].Ports) != 1 {
			continue // reported above; siw0 where the image has it
		}
		p := byName[dev].Ports[0]
		got := p.LineRateUnknown
		if p.LineRateMBs != nil {
			got = fmt.Sprint(*p.LineRateMBs)
		}
		t.Logf("%s: %s %s (%g Gb/s signalling), line rate %s", dev, p.Width, p.Speed, p.RateGbps, got)
		if !strings.Contains(got, want) || (p.LineRateMBs == nil) != (want != "1250") {
			t.Errorf("%s's line rate %q, want %q", dev, got, want)
		}
	}
	text, err := exec.Command(nodeBin(t), "devices").Output()
	if err != nil || !strings.Contains(string(text), "rxe0") || !strings.Contains(string(text), "::ffff:"+guestIP) || !strings.Contains(string(text), "max_msg_sz") || !strings.Contains(string(text), "line rate 1250.0 MB/s") {
		t.Errorf("node devices (table): %v\n%s", err, text)
	}
}

// TestServeRead runs the static node's serve and read over rxe0, with the
// secret, as the runner does.
func TestServeRead(t *testing.T) {
	for _, c := range []struct {
		block, size string
		bs, total   int64
		qd, qps     int
	}{
		{"4KiB", "8MiB", 4 << 10, 4 << 20, 16, 1},
		{"64KiB", "8MiB", 64 << 10, 16 << 20, 16, 1},
		{"1MiB", "8MiB", 1 << 20, 16 << 20, 16, 1},
		{"64KiB", "8MiB", 64 << 10, 16 << 20, 32, 2},
	} {
		t.Run(fmt.Sprintf("%s_qd%d_qps%d", c.block, c.qd, c.qps), func(t *testing.T) {
			const secret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
			srv := start(t, secret, serveArgs(t, c.size)...)
			ready := until[results.Ready](t, srv, "ready")
			if ready.Transport != "rdma" || ready.Mapping == "" || ready.GIDIndex == nil {
				t.Errorf("ready: %+v, want rdma with a mapping and gid_index", ready)
			}
			if ready.RegistrationS == nil || *ready.RegistrationS <= 0 || ready.RegistrationMBs == nil || *ready.RegistrationMBs <= 0 {
				t.Errorf("pinned registration not timed: registration_s %v, registration_mb_s %v", ready.RegistrationS, ready.RegistrationMBs)
			}
			if ready.RDMAPath == nil || ready.Device != "rxe0" || ready.GID != "::ffff:"+guestIP || ready.Connect != "tcp" {
				t.Errorf("ready names device/GID %+v, want rxe0 with ::ffff:%s over connect tcp", ready.RDMAPath, guestIP)
			}
			if ready.LineRateMBs == nil || *ready.LineRateMBs != 1250 {
				t.Errorf("ready's line rate %v (%s), want 1250 MB/s: rxe0 over eth0 at 10 Gb/s", ready.LineRateMBs, ready.LineRateUnknown)
			}
			t.Logf("ready: mapping %s, gid_index %d, registration %.4f s (%.0f MB/s)", ready.Mapping, *ready.GIDIndex, *ready.RegistrationS, *ready.RegistrationMBs)
			cl := start(t, secret, "read", "--transport", "rdma", "--server", fmt.Sprintf("%s:%d", guestIP, ready.Port),
				"--block-size", c.block, "--queue-depth", fmt.Sprint(c.qd), "--qps", fmt.Sprint(c.qps),
				"--total", fmt.Sprint(c.total), "--pattern", "random", "--verify")
			res := until[results.Result](t, cl, "result")
			finish(t, cl)
			if res.Bytes != c.total || res.Reads != c.total/c.bs || !res.Verified || res.BandwidthMBs <= 0 || res.GIDIndex == nil {
				t.Errorf("result %+v: want %d bytes in %d reads, verified, bandwidth > 0, gid_index", res, c.total, c.total/c.bs)
			}
			if !(res.LatP50Us > 0 && res.LatP50Us <= res.LatP99Us && res.LatP99Us <= res.LatMaxUs) {
				t.Errorf("latencies out of order: %+v", res)
			}
			// cq_moderation auto: every max(1, depth per QP / 4)th READ.
			perQP := (c.qd + c.qps - 1) / c.qps
			if res.RDMAPath == nil || res.CQModeration != max(1, perQP/4) || res.LatSamples != res.Reads/int64(res.CQModeration) || res.Device != "rxe0" || res.GID != "::ffff:"+guestIP || res.QueueDepthPerQP != perQP {
				t.Errorf("result: %d latency samples of %d reads, path %+v; want every %dth read timed (cq_moderation auto), rxe0 with ::ffff:%s", res.LatSamples, res.Reads, res.RDMAPath, max(1, perQP/4), guestIP)
			}
			done := until[results.Done](t, srv, "done")
			finish(t, srv)
			if done.BytesServed != c.total || done.Requests != c.total/c.bs {
				t.Errorf("server's done: %+v, want %d bytes in %d requests", done, c.total, c.total/c.bs)
			}
			t.Logf("%s qd %d qps %d: %.1f MB/s, p50 %.0f µs, p99 %.0f µs", c.block, c.qd, c.qps, res.BandwidthMBs, res.LatP50Us, res.LatP99Us)
		})
	}
}

func TestGIDIndexOutOfRange(t *testing.T) {
	// A GID index is at most 255 (ibv_global_route's sgid_index is a
	// uint8): node refuses more as it reads its flags, from the schema.
	// rxe's GID table is long and mostly empty: 200 is inside it but
	// unpopulated, and must say so and list the GIDs.
	msg := failure(t, start(t, "", serveArgs(t, "1MiB", "--gid-index", "70000")...))
	if !strings.Contains(msg, "--gid-index must be at most 255 (got 70000)") {
		t.Errorf("server with gid_index 70000: %q, want the flag refused", msg)
	}
	msg = failure(t, start(t, "", serveArgs(t, "1MiB", "--gid-index", "200")...))
	if !strings.Contains(msg, "gid_index 200") || !strings.Contains(msg, "not populated") || !strings.Contains(msg, "::ffff:"+guestIP+" (RoCE v2)") {
		t.Errorf("server with gid_index 200: %q, want it not populated with the GIDs listed", msg)
	}
	srv := start(t, "", serveArgs(t, "1MiB", "--accept-timeout", "5s")...)
	ready := until[results.Ready](t, srv, "ready")
	msg = failure(t, start(t, "", "read", "--transport", "rdma", "--server", fmt.Sprintf("%s:%d", guestIP, ready.Port),
		"--block-size", "4KiB", "--gid-index", "200"))
	if !strings.Contains(msg, "gid_index 200") || !strings.Contains(msg, "not populated") {
		t.Errorf("client with gid_index 200: %q, want it not populated", msg)
	}
}

// TestMaxRdAtomicOverDevice asks for more READs in flight per QP than
// rxe allows: the client must refuse before any read, naming the limit.
func TestMaxRdAtomicOverDevice(t *testing.T) {
	srv := start(t, "", serveArgs(t, "4MiB", "--accept-timeout", "5s")...)
	ready := until[results.Ready](t, srv, "ready")
	msg := failure(t, start(t, "", readArgs(guestIP, ready.Port, "--block-size", "4KiB", "--queue-depth", "16", "--max-rd-atomic", "255")...))
	if !strings.Contains(msg, "max_rd_atomic 255") || !strings.Contains(msg, "max_qp_init_rd_atom") {
		t.Errorf("max_rd_atomic 255 on rxe: %q, want a refusal naming max_qp_init_rd_atom", msg)
	}
}

// TestConformance runs the suite every transport passes, over rxe0, with
// node's own exchange and with rdma_cm.
func TestConformance(t *testing.T) {
	transporttest.Run(t, rdma.New(), transporttest.WithHost(guestIP), transporttest.WithRDMA(transport.RDMA{GIDIndex: -1}))
}

func TestConformanceCM(t *testing.T) {
	transporttest.Run(t, rdma.New(), transporttest.WithHost(guestIP), transporttest.WithRDMA(transport.RDMA{GIDIndex: -1, Connect: "cm"}))
}
