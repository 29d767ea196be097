package peer

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/testbed/testenv"
)

// awaitListening runs ss -ltn (through run) until port listens, as the
// runner does on the server's host.
func awaitListening(t *testing.T, port int, run func([]string) ([]byte, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run(ReadyCommand)
		if err != nil {
			t.Fatalf("%v: %v", ReadyCommand, err)
		}
		ok, err := Listening(out, port)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d not listening after 30s:\n%s", port, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func localRun(argv []string) ([]byte, error) { return exec.Command(argv[0], argv[1:]...).Output() }

// TestRunIperf3 runs the argv Build gives against the installed iperf3 on
// loopback, awaits the server with ss and Listening, and parses what the
// client prints: the mapping works with the real tool, not only on paper.
func TestRunIperf3(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "ss", "iproute2")
	c, err := Build(Iperf3, Params{BlockSize: 128 << 10, QPs: 2, Total: 256 << 20, ServerAddr: "127.0.0.1", Port: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(c.Server[0], c.Server[1:]...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	awaitListening(t, c.ReadyPort, localRun)
	out, err := exec.Command(c.Client[0], c.Client[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", c.Client, err, out)
	}
	if err := srv.Wait(); err != nil {
		t.Errorf("iperf3 -s -1 after its client: %v", err)
	}
	r, err := Parse(Iperf3, out)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "iperf3", r)
	// -n counts at the sender; the receiver may see a little less or more
	// framing, never a different order of magnitude.
	if r.Bytes < 200<<20 || r.Bytes > 300<<20 || r.Reported["host_total"] <= 0 {
		t.Errorf("iperf3 -n 256MiB: %+v", r)
	}
}

// TestRunFio runs Build's fio argv on a small file, warm and cold.
func TestRunFio(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	file := filepath.Join(t.TempDir(), "region.dat")
	if err := os.WriteFile(file, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []string{"warm", "cold"} {
		c, err := Build(Fio, Params{BlockSize: 64 << 10, QueueDepth: 4, Pattern: "random", Total: 32 << 20, Cache: cache, File: file, FileSize: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(c.Client[0], c.Client[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.Client, err, out)
		}
		r, err := Parse(Fio, out)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "fio "+cache, r)
		if r.Bytes != 32<<20 || r.Latency == nil || r.IOPS == nil {
			t.Errorf("fio %s, io_size 32MiB: %+v", cache, r)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
