//go:build bench

package tcp

// The loopback benchmark of issue 14: node's tcp transport against iperf3,
// 1 MiB blocks, node with 16 reads in flight, one stream each. It runs
// three pairs back to back in this one process (node, then iperf3, then
// the next pair), so both sides of each pair see the same load on a shared
// machine, and prints each pair's bandwidth, ratio and CPU seconds per
// measured second of every role, then the median ratio (goal >= 1.0). It
// never fails on speed.
//
//	go test -tags bench -run Bench -v ./node/transport/tcp
//
// iperf3 runs with the argv runner/peer builds for a plan's iperf3
// workload (-R, so the server sends as node serve does), and its report is
// read by the same parser. With RDMASWEEP_BENCH_NODE_BEFORE set to another
// node binary (e.g. built from an older commit), each pair runs it too,
// first, so a change is measured before and after in the same run.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"rdmasweep/internal/testenv"
	"rdmasweep/results"
	"rdmasweep/runner/peer"
)

const (
	benchPairs    = 3
	benchDuration = 5 * time.Second
	benchWarmup   = time.Second
)

type benchFigure struct {
	mbs, cpuClient, cpuServer float64
}

func TestBenchLoopback(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "ss", "iproute2")
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	if out, err := exec.Command("go", "build", "-o", node, "rdmasweep/node").CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "bench.dat")
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("loadavg before: %s", load)
	before := os.Getenv("RDMASWEEP_BENCH_NODE_BEFORE")
	var ratios, beforeRatios []float64
	for i := 1; i <= benchPairs; i++ {
		var b benchFigure
		if before != "" {
			b = benchNode(t, before, file)
		}
		n := benchNode(t, node, file)
		p := benchIperf(t)
		ratios = append(ratios, n.mbs/p.mbs)
		if before != "" {
			beforeRatios = append(beforeRatios, b.mbs/p.mbs)
			t.Logf("pair %d: before %6.0f MB/s (cpu/s client %.2f server %.2f), ratio %.2f",
				i, b.mbs, b.cpuClient, b.cpuServer, b.mbs/p.mbs)
		}
		t.Logf("pair %d: node %6.0f MB/s (cpu/s client %.2f server %.2f) | iperf3 %6.0f MB/s (cpu/s client %.2f server %.2f) | ratio %.2f",
			i, n.mbs, n.cpuClient, n.cpuServer, p.mbs, p.cpuClient, p.cpuServer, n.mbs/p.mbs)
	}
	if before != "" {
		slices.Sort(beforeRatios)
		t.Logf("before / iperf3: ratios %.2f, median %.2f", beforeRatios, beforeRatios[len(beforeRatios)/2])
	}
	load, _ = os.ReadFile("/proc/loadavg")
	t.Logf("loadavg after: %s", load)
	slices.Sort(ratios)
	t.Logf("node tcp / iperf3, 1MiB, node 16 in flight, %d pairs of %s + %s warmup: ratios %.2f, median %.2f (goal >= 1.0)",
		benchPairs, benchDuration, benchWarmup, ratios, ratios[len(ratios)/2])
}

func benchNode(t *testing.T, node, file string) benchFigure {
	serve := exec.Command(node, "serve", "--transport", "tcp", "--file", file, "--file-size", "1GiB", "--create",
		"--cache", "warm", "--listen", "127.0.0.1", "--port", "0", "--accept-timeout", "30s")
	serve.Stderr = os.Stderr
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Wait()
	defer serve.Process.Kill()
	events := make(chan any, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ev, err := results.Decode(sc.Bytes()); err == nil {
				events <- ev
			}
		}
	}()
	port := 0
	for ev := range events {
		if r, ok := ev.(*results.Ready); ok {
			port = r.Port
			break
		}
	}
	if port == 0 {
		t.Fatal("node serve never became ready")
	}
	read := exec.Command(node, "read", "--transport", "tcp", "--server", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"--block-size", "1MiB", "--queue-depth", "16", "--pattern", "sequential",
		"--duration", benchDuration.String(), "--warmup", benchWarmup.String())
	read.Stderr = os.Stderr
	readStart := time.Now()
	b, err := read.Output()
	readWall := time.Since(readStart).Seconds()
	if err != nil {
		t.Fatalf("node read: %v\n%s", err, b)
	}
	var res results.Result
	if err := json.Unmarshal(lastLine(b), &res); err != nil || res.Type != results.TypeResult {
		t.Fatalf("node read printed %q", b)
	}
	var done *results.Done
	for ev := range events {
		if d, ok := ev.(*results.Done); ok {
			done = d
		}
	}
	if done == nil {
		t.Fatal("node serve printed no done event")
	}
	serveWall := time.Since(readStart).Seconds()
	serve.Wait()
	f := benchFigure{mbs: res.BandwidthMBs}
	// A node from before cpu_*_s reports no CPU: take its whole process's
	// from the kernel instead (its warmup and start included).
	if res.CPUWallS > 0 {
		f.cpuClient = (res.CPUUserS + res.CPUSysS) / res.CPUWallS
	} else {
		f.cpuClient = (read.ProcessState.UserTime() + read.ProcessState.SystemTime()).Seconds() / readWall
	}
	if done.CPUWallS > 0 {
		f.cpuServer = (done.CPUUserS + done.CPUSysS) / done.CPUWallS
	} else {
		f.cpuServer = (serve.ProcessState.UserTime() + serve.ProcessState.SystemTime()).Seconds() / serveWall
	}
	return f
}

func benchIperf(t *testing.T) benchFigure {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c, err := peer.Build(peer.Iperf3, peer.Params{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1,
		Duration: benchDuration, Warmup: benchWarmup, ServerAddr: "127.0.0.1", Port: port})
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(c.Server[0], c.Server[1:]...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ss, err := exec.Command(peer.ReadyCommand[0], peer.ReadyCommand[1:]...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := peer.Listening(ss, c.ReadyPort); err != nil {
			t.Fatal(err)
		} else if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("iperf3 -s did not listen within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := exec.Command(c.Client[0], c.Client[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", c.Client, err, b)
	}
	r, err := peer.Parse(peer.Iperf3, b, peer.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.CPUClient == nil || r.CPUServer == nil {
		t.Fatalf("iperf3 reported no CPU: %.300s", b)
	}
	return benchFigure{mbs: r.BandwidthMBs, cpuClient: *r.CPUClient, cpuServer: *r.CPUServer}
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
