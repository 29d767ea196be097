package vmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"rdmasweep/testbed/guest"
	"rdmasweep/testbed/testenv"
)

// needHost skips (or fails under CI) unless the host can build the image,
// the static binaries, and run qemu.
func needHost(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t)
	for _, tool := range [][2]string{
		{"qemu-system-x86_64", "qemu-system-x86"}, {"apt-get", "apt"}, {"dpkg", "dpkg"}, {"cpio", "cpio"},
		{"zstd", "zstd"}, {"depmod", "kmod"}, {"modprobe", "kmod"}, {"pkg-config", "pkg-config"}, {"gcc", "gcc"},
	} {
		testenv.NeedTool(t, tool[0], tool[1])
	}
	for _, lib := range []string{"libibverbs.a", "librdmacm.a"} {
		if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/" + lib); err != nil {
			testenv.Skip(t, "no static "+lib+" (apt-get install libibverbs-dev librdmacm-dev libnl-3-dev libnl-route-3-dev)")
		}
	}
	testenv.NeedTool(t, "make", "make")
	testenv.NeedTool(t, "xz", "xz-utils")
	// siw for a newer suite's kernel builds objtool (siw.go).
	if _, err := os.Stat("/usr/include/gelf.h"); err != nil {
		testenv.Skip(t, "no libelf headers, which building siw's objtool needs (apt-get install libelf-dev)")
	}
}

// buildBinaries builds the static node (or takes $RDMASWEEP_NODE, e.g. the
// Makefile's bin/node) and the guest test binary, side by side.
func buildBinaries(t *testing.T, ctx context.Context, tags ...string) (node, tests string) {
	t.Helper()
	dir := t.TempDir()
	node, tests = os.Getenv("RDMASWEEP_NODE"), filepath.Join(dir, "guest.test")
	var wg sync.WaitGroup
	var nodeErr, testsErr error
	if node == "" {
		node = filepath.Join(dir, "node")
		wg.Add(1)
		go func() { defer wg.Done(); nodeErr = guest.BuildNode(ctx, node) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); testsErr = guest.BuildGuestTests(ctx, tests, tags...) }()
	wg.Wait()
	if err := errors.Join(nodeErr, testsErr); err != nil {
		t.Fatal(err)
	}
	return node, tests
}

// consoleLog collects the guest console, to show it when a test fails.
type consoleLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (c *consoleLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *consoleLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestGuest runs the guest tests (package guest) on every kernel of
// Kernels, one guest at a time: the static node's serve and read over
// soft-RoCE (rxe0, rxe1 on a second NIC) and soft-iWARP (siw0 on a third,
// where the kernel has siw), odp, the depth, moderation and fabric
// settings, rdma_cm, malformed and vanishing peers of the handshake, and
// the transport conformance suite with both connect modes. It drives each
// guest the way the runner does: over SSH through qemu's hostfwd, with an
// SFTP upload. Then, in the same boot (each costs 15–30 s under TCG),
// RunnerSweep has the runner itself run a sweep with both roles in the
// guest.
func TestGuest(t *testing.T) {
	needHost(t)
	sel := selection(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	start := time.Now()
	imgDone, runnerDone := make(chan error, 1), make(chan error, 1)
	go func() {
		var errs []error
		for _, k := range sel.kernels {
			if _, err := guest.EnsureImage(ctx, k, testLog{t}); err != nil {
				errs = append(errs, err)
			}
		}
		imgDone <- errors.Join(errs...)
	}()
	runner := filepath.Join(t.TempDir(), "runner")
	go func() { runnerDone <- buildRunner(ctx, runner) }()
	node, tests := buildBinaries(t, ctx)
	if err := <-imgDone; err != nil {
		t.Fatal(err)
	}
	// A runner that does not build fails only RunnerSweep, below.
	runnerErr := <-runnerDone
	t.Logf("images and binaries ready after %s", time.Since(start).Round(time.Second))
	for _, k := range sel.kernels {
		t.Run(k.Name, func(t *testing.T) { guestSuite(t, ctx, sel, k, node, tests, runner, runnerErr) })
	}
}

// guestSelection narrows TestGuest by hand, for working on a few guest
// tests: RDMASWEEP_VMTEST_RUN, a -test.run regexp, runs only the guest
// tests it matches (and no runner sweep), and RDMASWEEP_VMTEST_KERNELS, a
// comma-separated list of kernel names (bookworm, trixie-backports), boots
// only those. Under CI=true either fails the run: CI runs all of it.
type guestSelection struct {
	run     string
	kernels []guest.Kernel
}

func selection(t *testing.T) guestSelection {
	t.Helper()
	sel := guestSelection{run: os.Getenv("RDMASWEEP_VMTEST_RUN"), kernels: guest.Kernels}
	names := os.Getenv("RDMASWEEP_VMTEST_KERNELS")
	if (sel.run != "" || names != "") && testenv.InCI() {
		t.Fatal("RDMASWEEP_VMTEST_RUN or RDMASWEEP_VMTEST_KERNELS narrows the guest suite; under CI=true all of it runs")
	}
	if sel.run != "" {
		if _, err := regexp.Compile(sel.run); err != nil {
			t.Fatalf("RDMASWEEP_VMTEST_RUN: %v", err)
		}
	}
	if names != "" {
		sel.kernels = nil
		for _, n := range strings.Split(names, ",") {
			i := slices.IndexFunc(guest.Kernels, func(k guest.Kernel) bool { return k.Name == n })
			if i < 0 {
				t.Fatalf("RDMASWEEP_VMTEST_KERNELS: no kernel %q (want some of bookworm, trixie-backports)", n)
			}
			sel.kernels = append(sel.kernels, guest.Kernels[i])
		}
	}
	return sel
}

// selected reports whether the selection runs the guest test name (a
// top-level name, or one with its subtest).
func (s guestSelection) selected(name string) bool {
	top, _, _ := strings.Cut(name, "/")
	return s.run == "" || regexp.MustCompile(s.run).MatchString(top)
}

// required are the guest tests that must pass on every kernel: a test
// that was never run passes nothing.
var required = []string{"TestDevices", "TestServeRead", "TestGIDIndexOutOfRange", "TestMaxRdAtomicOverDevice",
	"TestConformance", "TestConformanceCM", "TestMalformedHandshake", "TestClientGoneAfterHandshake", "TestConnectModeMismatch",
	"TestLatencyExcludesVerify", "TestLatencyVerifyOnOff", "TestFirstMismatch", "TestMemAvailable", "TestMultiNIC", "TestWildcardListen",
	"TestDepth", "TestCQModeration", "TestFabric", "TestCM", "TestDevicesKeepsGoing", "TestIntervals",
	"TestDefaultRoCETOS", "TestMemlockWithoutCaps", "TestPortDownEndsPoint", "TestOpenLoopRDMA", "TestAttachLoopRDMA"}

// requiredOn are what a kernel's guest must pass besides: siw where the
// image has it; registration odp refused where rxe lacks ODP (6.1), and
// timed and caught returning wrong data where it advertises it (7.x).
func requiredOn(k guest.Kernel, im *guest.Image) []string {
	var r []string
	if im.Siw {
		r = append(r, siwTests...)
	}
	if k.Suite == "" {
		r = append(r, "TestODP/refused")
	} else {
		r = append(r, "TestODP/advertised")
	}
	return r
}

// siwTests need siw0. The host leaves them out of a guest whose image has
// no siw, and says so; inside the guest nothing skips.
var siwTests = []string{"TestCMSiw", "TestSiwNeedsCM"}

// The lines of go test -v output that guestSkips reads: a test starting
// or resuming ("=== RUN   TestX", "=== NAME  TestX"), a log line of the
// current test ("    file_test.go:12: reason"), and a skip ("--- SKIP:
// TestX (0.00s)", indented for subtests).
var (
	testLineRE = regexp.MustCompile(`^=== (?:RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	logLineRE  = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)`)
	skipLineRE = regexp.MustCompile(`^\s*--- SKIP: (\S+)`)
)

// guestSkips returns the tests that reported SKIP in go test -v output,
// each with the last line it logged (the skip's reason).
func guestSkips(out string) []string {
	var skips []string
	last := map[string]string{}
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if m := testLineRE.FindStringSubmatch(l); m != nil {
			cur = m[1]
		} else if m := logLineRE.FindStringSubmatch(l); m != nil && cur != "" {
			last[cur] = m[1]
		} else if m := skipLineRE.FindStringSubmatch(l); m != nil {
			s := m[1]
			if r := last[m[1]]; r != "" {
				s += ": " + r
			}
			skips = append(skips, s)
		}
	}
	return skips
}

func guestSuite(t *testing.T, ctx context.Context, sel guestSelection, k guest.Kernel, node, tests, runner string, runnerErr error) {
	start := time.Now()
	var console consoleLog
	var tee io.Writer = &console
	if p := os.Getenv("RDMASWEEP_VMTEST_CONSOLE"); p != "" {
		f, err := os.Create(p + "." + k.Name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tee = io.MultiWriter(&console, f)
	}
	// A kernel whose rxe has ODP gets an NVMe drive too, for the faults
	// of a cold odp point (fieldsSweep): a file in the guest's tmpfs
	// never comes from a disk.
	var nvme string
	if k.Suite != "" {
		testenv.NeedTool(t, "mkfs.ext4", "e2fsprogs")
		nvme = filepath.Join(t.TempDir(), "nvme.img")
		if err := guest.NewExt4Image(ctx, nvme, 128<<20); err != nil {
			t.Fatal(err)
		}
	}
	g, err := guest.Boot(ctx, guest.Options{
		Kernel:  k,
		Files:   map[string]guest.File{"/vmtest/node": {Host: node, Mode: 0o755}, "/vmtest/guest.test": {Host: tests, Mode: 0o755}},
		NVMe:    nvme,
		Console: tee, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	t.Logf("guest kernel %s (%s), siw %v", g.Image.Release, k.Name, g.Image.Siw)
	c, err := g.Dial()
	if err != nil {
		t.Fatalf("ssh to the guest: %v", err)
	}
	defer c.Close()
	checkSFTP(t, c)
	// Each part is a subtest of its own, so -run can pick one from the
	// same boot, e.g. 'TestGuest/bookworm/RunnerRefusesSiwUnderTCP'.
	t.Run("Suite", func(t *testing.T) { guestTests(t, sel, g, k, c, tests, start, &console) })
	// The same guest, driven end to end by the runner.
	t.Run("RunnerSweep", func(t *testing.T) {
		if sel.run != "" {
			testenv.Unselected(t, "RDMASWEEP_VMTEST_RUN", "RDMASWEEP_VMTEST_RUN runs only the guest tests it matches")
		}
		if runnerErr != nil {
			t.Fatal(runnerErr)
		}
		sweepStart := time.Now()
		runnerSweep(t, ctx, g, c, runner, node)
		t.Logf("runner sweep took %s", time.Since(sweepStart).Round(100*time.Millisecond))
	})
	// Selected by its own name too (RDMASWEEP_VMTEST_RUN=RunnerPeerCPU).
	if sel.selected("RunnerPeerCPU") {
		t.Run("RunnerPeerCPU", func(t *testing.T) {
			if runnerErr != nil {
				t.Fatal(runnerErr)
			}
			runnerPeerCPU(t, ctx, g, runner, node)
		})
	}
	t.Run("RunnerRefusesSiwUnderTCP", func(t *testing.T) {
		if sel.run != "" {
			testenv.Unselected(t, "RDMASWEEP_VMTEST_RUN", "RDMASWEEP_VMTEST_RUN runs only the guest tests it matches")
		}
		if runnerErr != nil {
			t.Fatal(runnerErr)
		}
		if !g.Image.Siw {
			testenv.Skip(t, "the image of kernel "+g.Image.Release+" has no siw")
		}
		runnerRefusesSiwUnderTCP(t, ctx, g, runner, node)
	})
	t.Logf("kernel %s: %s from boot to the end of the sweep", g.Image.Release, time.Since(start).Round(time.Second))
}

// guestTests runs the guest test binary inside the guest and holds it to
// required and requiredOn.
func guestTests(t *testing.T, sel guestSelection, g *guest.Guest, k guest.Kernel, c *ssh.Client, tests string, start time.Time, console *consoleLog) {
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sess.Stdout, sess.Stderr = &out, &out
	flags := ""
	if !g.Image.Siw {
		// Every kernel of Kernels builds siw into its image, so this is a
		// kernel added without it: its siw tests go untested.
		t.Run("siw", func(t *testing.T) {
			testenv.Skip(t, fmt.Sprintf("the image of kernel %s has no siw: %s not run", g.Image.Release, strings.Join(siwTests, ", ")))
		})
		flags = " -test.skip '^(" + strings.Join(siwTests, "|") + ")$'"
	}
	if sel.run != "" {
		flags += " -test.run '" + sel.run + "'"
	}
	runErr := sess.Run("cd /tmp && NODE=/vmtest/node /vmtest/guest.test -test.v -test.timeout 10m" + flags)
	t.Logf("guest tests on %s finished after %s", g.Image.Release, time.Since(start).Round(time.Second))
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "--- ") || strings.Contains(l, "MB/s") || strings.Contains(l, "ready: ") || strings.Contains(l, "kernel ") || strings.Contains(l, "µs") {
			t.Log("guest: " + strings.TrimSpace(l))
		}
	}
	if runErr != nil {
		t.Fatalf("guest tests on kernel %s: %v; output:\n%s\nconsole:\n%s", g.Image.Release, runErr, out.String(), console.String())
	}
	// A test skipped inside the guest would pass unnoticed: none may
	// under CI, and by hand each is shown.
	for _, s := range guestSkips(out.String()) {
		if testenv.InCI() {
			t.Errorf("guest on kernel %s skipped %s (under CI=true a skip is a failure)", g.Image.Release, s)
		} else {
			t.Logf("guest on kernel %s skipped %s", g.Image.Release, s)
		}
	}
	for _, name := range append(append([]string{}, required...), requiredOn(k, g.Image)...) {
		if !sel.selected(name) {
			continue
		}
		if !regexp.MustCompile(`--- PASS: ` + name + ` `).MatchString(out.String()) {
			t.Errorf("guest on kernel %s did not pass %s", g.Image.Release, name)
		}
	}
}

// checkSFTP uploads a file over the sftp subsystem, as the runner deploys
// node, and reads it back over a session.
func checkSFTP(t *testing.T, c *ssh.Client) {
	t.Helper()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatalf("sftp subsystem of the guest: %v", err)
	}
	defer sc.Close()
	want := fmt.Sprintf("uploaded at %s\n", time.Now())
	f, err := sc.Create("/tmp/sftp-check")
	if err == nil {
		_, err = f.Write([]byte(want))
		f.Close()
	}
	if err != nil {
		t.Fatalf("sftp upload: %v", err)
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	got, err := sess.Output("cat /tmp/sftp-check")
	if err != nil || string(got) != want {
		t.Fatalf("file uploaded over sftp reads back %q, %v; want %q", got, err, want)
	}
}

// TestGuestScript checks the harness's verdict: a Run script's exit status
// becomes the VMTEST RESULT line that Wait reports. The script fails on
// purpose (exit 3) only once it has seen rxe0, so the status in the verdict
// proves both that the guest set up soft-RoCE and that a failure inside
// reaches the host even though qemu exits 0.
func TestGuestScript(t *testing.T) {
	needHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var console consoleLog
	g, err := guest.Boot(ctx, guest.Options{Run: "#!/bin/sh\nibv_devices | grep -q rxe0 || exit 1\nexit 3\n", Console: &console, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	err = g.Wait(ctx)
	if !errors.Is(err, guest.ErrFailed) || !strings.Contains(err.Error(), "rc=3") {
		t.Errorf("Wait = %v, want ErrFailed with rc=3; console:\n%s", err, console.String())
	}
}
