//go:build peerfixtures

package peer

// The fixtures in testdata come from real runs of the peers, made by this
// file with the commands Build gives (so the fixtures also show that the
// argv works):
//
//	go test -tags peerfixtures -run TestFixtures -v ./runner/points/peer/
//
// TestFixturesLocal runs iperf3 and fio here, TestFixturesCeiling the
// disk ceiling's fio runs (on /var/tmp); TestFixturesGuest boots the
// soft-RoCE guest (testbed/guest; set RDMASWEEP_VM_CACHE) and
// runs ib_read_bw's server and client in it over ssh, awaiting the server
// with ss -ltn and Listening. Each fixture NAME.json has a NAME.cmd beside
// it with the argv that made it and the tool's version.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"rdmasweep/testbed/guest"
	"rdmasweep/testbed/testenv"
)

func writeFixture(t *testing.T, peer, name string, report []byte, version string, cmds ...[]string) {
	t.Helper()
	dir := filepath.Join("testdata", peer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var how strings.Builder
	fmt.Fprintf(&how, "# %s, made by fixtures_test.go on %s\n", strings.TrimSpace(version), time.Now().UTC().Format("2006-01-02"))
	for _, c := range cmds {
		fmt.Fprintln(&how, strings.Join(c, " "))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), report, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".cmd"), []byte(how.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	parser := peer
	if peer == "fio-ceiling" {
		parser = Fio // the ceiling's runs are fio's
	}
	r, err := Parse(parser, report)
	if err != nil {
		t.Fatalf("%s/%s does not parse: %v", peer, name, err)
	}
	t.Logf("%s/%s: %+v", peer, name, r)
}

func TestFixturesLocal(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "fio", "fio")
	iperfVersion, _ := exec.Command("iperf3", "--version").Output()
	iperfVersion, _, _ = bytes.Cut(iperfVersion, []byte("\n"))
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"duration-1MiB-P1", Params{BlockSize: 1 << 20, QPs: 1, Duration: 3 * time.Second, Warmup: time.Second, ServerAddr: "127.0.0.1", Port: 25201}},
		{"total-64KiB-P2", Params{BlockSize: 64 << 10, QPs: 2, Total: 2 << 30, ServerAddr: "127.0.0.1", Port: 25202}},
	} {
		c, err := Build(Iperf3, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		srv := exec.Command(c.Server[0], c.Server[1:]...)
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		awaitListening(t, c.ReadyPort, localRun)
		out, err := exec.Command(c.Client[0], c.Client[1:]...).Output()
		srv.Wait()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.Client, err, out)
		}
		writeFixture(t, Iperf3, tc.name, out, string(iperfVersion), c.Server, c.Client)
	}

	fioVersion, _ := exec.Command("fio", "--version").Output()
	dir := t.TempDir()
	file := filepath.Join(dir, "region.dat")
	data := make([]byte, 256<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"warm-seq-1MiB-qd16-duration", Params{BlockSize: 1 << 20, QueueDepth: 16, Pattern: "sequential", Duration: 3 * time.Second, Warmup: time.Second, Cache: "warm", File: file, FileSize: 256 << 20}},
		{"cold-rand-4KiB-qd8-total", Params{BlockSize: 4 << 10, QueueDepth: 8, Pattern: "random", Total: 64 << 20, Cache: "cold", File: file, FileSize: 256 << 20}},
	} {
		c, err := Build(Fio, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(c.Client[0], c.Client[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.Client, err, out)
		}
		// The temp dir's name changes every run; keep the fixture stable.
		out = bytes.ReplaceAll(out, []byte(dir), []byte("/srv/rdmasweep"))
		argv := strings.Fields(strings.ReplaceAll(strings.Join(c.Client, " "), dir, "/srv/rdmasweep"))
		writeFixture(t, Fio, tc.name, out, string(fioVersion), argv)
	}
}

func TestFixturesGuest(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedTool(t, "qemu-system-x86_64", "qemu-system-x86")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	g, err := guest.Boot(ctx, guest.Options{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	c, err := g.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(argv []string) ([]byte, error) {
		s, err := c.NewSession()
		if err != nil {
			return nil, err
		}
		defer s.Close()
		var stderr bytes.Buffer
		s.Stderr = &stderr
		out, err := s.Output("cd /tmp && " + strings.Join(argv, " "))
		if err != nil {
			return out, fmt.Errorf("%w: %s", err, stderr.Bytes())
		}
		return out, nil
	}
	// The guest's root is unpacked without dpkg's database, and
	// ib_read_bw --version prints perftest's protocol version (6.06):
	// the package version comes from the same apt the image is built from.
	deb, _ := exec.Command("apt-cache", "show", "--no-all-versions", "perftest").Output()
	version := "perftest"
	for _, l := range strings.Split(string(deb), "\n") {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			version += " " + v
		}
	}
	proto, _ := run([]string{"ib_read_bw", "--version"})
	version += " (ib_read_bw --version: " + strings.TrimSpace(string(proto)) + ")"
	cpus, _ := run([]string{"nproc"})
	t.Logf("guest: %s, %s CPUs", version, bytes.TrimSpace(cpus))
	const guestIP = "10.0.2.15" // qemu user networking; rxe0 on eth0, gid 1 is ::ffff:10.0.2.15
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"duration-1MiB-qd16", Params{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1, Duration: 4 * time.Second, Warmup: time.Second,
			RDMADevice: "rxe0", RDMAIBPort: 1, RDMAGIDIndex: 1, RDMAMaxRdAtomic: 16, ServerAddr: guestIP, OutDir: "/tmp"}},
		{"total-64KiB-qd16-2qps", Params{BlockSize: 64 << 10, QueueDepth: 16, QPs: 2, Total: 32 << 20,
			RDMADevice: "rxe0", RDMAGIDIndex: 1, ServerAddr: guestIP, Port: 18600, OutDir: "/tmp"}},
	} {
		cmds, err := Build(IBReadBW, tc.p)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		var srvOut bytes.Buffer
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start("cd /tmp && exec " + strings.Join(cmds.Server, " ")); err != nil {
			t.Fatal(err)
		}
		awaitListening(t, cmds.ReadyPort, run)
		cliOut, err := run(cmds.Client)
		if err != nil {
			t.Fatalf("%v: %v\n%s\nserver:\n%s", cmds.Client, err, cliOut, srvOut.Bytes())
		}
		if err := waitSession(srv, 30*time.Second); err != nil {
			t.Fatalf("server: %v\n%s", err, srvOut.Bytes())
		}
		t.Logf("client stdout:\n%s", cliOut)
		report, err := run([]string{"cat", cmds.ClientReport})
		if err != nil {
			t.Fatal(err)
		}
		writeFixture(t, IBReadBW, tc.name, report, version+"; Debian 12 guest, soft-RoCE rxe0 under qemu TCG, "+strings.TrimSpace(string(cpus))+" CPUs", cmds.Server, cmds.Client)
		srvReport, err := run([]string{"cat", cmds.ServerReport})
		if err == nil {
			os.WriteFile(filepath.Join("testdata", IBReadBW, tc.name+".server.json"), srvReport, 0o644)
		}
	}
}

func waitSession(s *ssh.Session, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		s.Close()
		return fmt.Errorf("did not exit within %s", d)
	}
}

// TestFixturesCorpus writes the parsers' fuzz seeds from the fixtures: each
// report whole, cut in half, and without its last bytes.
//
//	go test -tags peerfixtures -run TestFixturesCorpus ./runner/points/peer/
func TestFixturesCorpus(t *testing.T) {
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(seed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for peer, target := range map[string]string{IBReadBW: "FuzzParseIBReadBW", Iperf3: "FuzzParseIperf3", Fio: "FuzzParseFio"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", peer, "*.json"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(filepath.Base(p), ".json")
			write(target, base, b)
			write(target, base+"-cut-half", b[:len(b)/2])
			write(target, base+"-cut-end", b[:len(b)-3])
		}
		write(target, "empty", nil)
		write(target, "brace", []byte("{}"))
	}
}

// TestFixturesCeiling runs two of the ceiling's fio runs here, on a file
// of a disk (not tmpfs, which refuses O_DIRECT), into testdata/fio-ceiling.
func TestFixturesCeiling(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	fioVersion, _ := exec.Command("fio", "--version").Output()
	dir, err := os.MkdirTemp("/var/tmp", "rdmasweep-ceiling-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "region.dat")
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runs := CeilingRuns(file, int64(len(data)), 1<<40)
	for _, i := range []int{0, len(runs) - 1} { // 1 MiB, one job, depth 32; 128 KiB, 4 jobs, depth 128
		argv := runs[i]
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		out = bytes.ReplaceAll(out, []byte(dir), []byte("/srv/rdmasweep"))
		argv = strings.Fields(strings.ReplaceAll(strings.Join(argv, " "), dir, "/srv/rdmasweep"))
		name := fmt.Sprintf("bs%s-qd%s-jobs%s", opt(argv, "--bs="), opt(argv, "--iodepth="), opt(argv, "--numjobs="))
		writeFixture(t, "fio-ceiling", name, out, string(fioVersion), argv)
	}
}

// opt is the value of argv's option prefix ("--bs=").
func opt(argv []string, prefix string) string {
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v
		}
	}
	return ""
}
