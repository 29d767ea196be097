//go:build bench

package tcp

// The loopback benchmark of issue 2: node's tcp transport against iperf3,
// one stream each, 1 MiB blocks. It prints both figures and their ratio
// (goal ≥ 0.8) and never fails on speed.
//
//	go test -tags bench -run Bench -v ./node/transport/tcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"rdmasweep/internal/testenv"
	"rdmasweep/results"
)

const benchSeconds = 10

func TestBenchLoopback(t *testing.T) {
	iperf := testenv.NeedTool(t, "iperf3", "iperf3")
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	if out, err := exec.Command("go", "build", "-o", node, "rdmasweep/node").CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	nodeMBs := benchNode(t, node, filepath.Join(dir, "bench.dat"))
	iperfMBs := benchIperf(t, iperf)
	t.Logf("node tcp   1MiB blocks, 16 in flight: %8.0f MB/s", nodeMBs)
	t.Logf("iperf3 -c 127.0.0.1 -t %d -l 1M:       %8.0f MB/s", benchSeconds, iperfMBs)
	t.Logf("ratio node/iperf3: %.2f (goal >= 0.8)", nodeMBs/iperfMBs)
}

func benchNode(t *testing.T, node, file string) float64 {
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
	port := 0
	sc := bufio.NewScanner(out)
	for port == 0 && sc.Scan() {
		if ev, err := results.Decode(sc.Bytes()); err == nil {
			if r, ok := ev.(*results.Ready); ok {
				port = r.Port
			}
		}
	}
	if port == 0 {
		t.Fatal("node serve never became ready")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	read := exec.Command(node, "read", "--transport", "tcp", "--server", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		"--block-size", "1MiB", "--queue-depth", "16", "--pattern", "sequential",
		"--duration", fmt.Sprintf("%ds", benchSeconds), "--warmup", "1s")
	read.Stderr = os.Stderr
	b, err := read.Output()
	if err != nil {
		t.Fatalf("node read: %v\n%s", err, b)
	}
	var res results.Result
	if err := json.Unmarshal(lastLine(b), &res); err != nil || res.Type != results.TypeResult {
		t.Fatalf("node read printed %q", b)
	}
	t.Logf("node: %d bytes in %.2f s, p50 %.0f us, p99 %.0f us", res.Bytes, res.Seconds, res.LatP50Us, res.LatP99Us)
	return res.BandwidthMBs
}

func benchIperf(t *testing.T, iperf string) float64 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	srv := exec.Command(iperf, "-s", "-1", "-B", "127.0.0.1", "-p", port)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	// A probe connection would count as -1's one client, so the client
	// itself retries until the server listens.
	var b []byte
	for i := 0; ; i++ {
		b, err = exec.Command(iperf, "-c", "127.0.0.1", "-p", port, "-t", strconv.Itoa(benchSeconds), "-l", "1M", "-J").Output()
		// iperf3 -J may exit 0 with the refusal in its JSON's "error".
		if i == 50 || !bytes.Contains(b, []byte("unable to connect")) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 -c: %v\n%s", err, b)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.End.SumReceived.BitsPerSecond <= 0 {
		t.Fatalf("iperf3 printed %.200q: %v", b, err)
	}
	return r.End.SumReceived.BitsPerSecond / 8 / 1e6
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}
