package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/node/pattern"
	"rdmasweep/testbed/testenv"
)

// TestVerifySampleFlippedByte: a sample of a patterned file checks out,
// and one byte changed in a block the sample always reads (the first, the
// last) fails it, naming the block's offset and the byte's.
func TestVerifySampleFlippedByte(t *testing.T) {
	const block, size, seed = 4096, 64 << 10, 0x5eed
	path := filepath.Join(t.TempDir(), "ns")
	buf := make([]byte, size)
	pattern.Fill(buf, 0, seed)
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := verifySample(path, block, size, 8, seed); err != nil || n != 8 {
		t.Fatalf("the file as made: %d blocks, %v; want 8 checked, no error", n, err)
	}
	for _, at := range []int64{5, size - 3} {
		flipped := append([]byte{}, buf...)
		flipped[at] ^= 0x01
		if err := os.WriteFile(path, flipped, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := verifySample(path, block, size, 8, seed)
		want := fmt.Sprintf("offset %d differs from the file's pattern at byte offset %d", at/block*block, at)
		if !errors.Is(err, errVerify) || !strings.Contains(err.Error(), want) {
			t.Errorf("byte %d flipped: %v; want a mismatch saying %q", at, err, want)
		}
	}
}

// TestAwaitDoneOnlyTheSecret: node nvmet's done listener ignores a
// stranger who sends the old plain "done HOSTNQN", one who answers the
// challenge with another secret, and one who connects and says nothing
// (while that one waits, the client is still heard); it ends when the
// client proves the point's secret.
func TestAwaitDoneOnlyTheSecret(t *testing.T) {
	secret, other := []byte("the point's secret, 32 bytes....."), []byte("another point's secret, 32 bytes")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- awaitDone(ctx, l, secret, time.Hour) }()
	idle, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	plain, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	plain.Write([]byte("done nqn.2014-08.org.rdmasweep:host-0123456789abcdef"))
	plain.Close()
	if err := sayDone(ctx, "127.0.0.1", port, other); err != nil {
		t.Fatalf("a stranger's answer: %v", err)
	}
	select {
	case err := <-ended:
		t.Fatalf("the listener ended on a stranger's done: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := sayDone(ctx, "127.0.0.1", port, secret); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the client's done: %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("the client's done was not heard while a stranger's connection stayed open")
	}
}

// TestAwaitDoneAfterTheLifetime: once node nvmet's lifetime has ended
// (the runner's session gone), its target stays until the client says it
// has deleted its controller, and no longer than the grace when the
// client never does; either way it returns why the lifetime ended.
func TestAwaitDoneAfterTheLifetime(t *testing.T) {
	secret := []byte("the point's secret, 32 bytes.....")
	listen := func() (net.Listener, int) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l, l.Addr().(*net.TCPAddr).Port
	}
	bound, cancelBound := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelBound()

	l, port := listen()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- awaitDone(ctx, l, secret, time.Hour) }()
	cancel()
	select {
	case err := <-ended:
		t.Fatalf("returned (%v) when the lifetime ended, before the client said done", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := sayDone(bound, "127.0.0.1", port, secret); err != nil {
		t.Fatalf("the client's done after the lifetime: %v", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after the lifetime and the client's done: %v; want the lifetime's end", err)
		}
	case <-bound.Done():
		t.Fatal("the client's done after the lifetime was not heard")
	}

	l, _ = listen()
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	go func() { ended <- awaitDone(ctx, l, secret, 100*time.Millisecond) }()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after the grace: %v; want the lifetime's end", err)
		}
	case <-bound.Done():
		t.Fatal("no done and the grace spent, yet awaitDone still waits")
	}
}

// TestFioEndsWithItsContext: node nvmeof-read's fio, reading a file for
// minutes, is stopped when the lifetime ends: runFio returns, and no fio
// process reading that file is left (a job forked from fio outlived its
// killed parent, holding the namespace and node's wait on its output).
func TestFioEndsWithItsContext(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	file := filepath.Join(t.TempDir(), "ns")
	if err := os.WriteFile(file, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	o := nvmeofReadOptions{blockSize: 4096, size: 1 << 20, depth: 4, duration: durationFlag(10 * time.Minute)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() { _, err := runFio(ctx, o, file); ended <- err }()
	reading := func() []string {
		var pids []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && strings.HasPrefix(string(b), "fio\x00") && strings.Contains(string(b), file) {
				if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !strings.Contains(string(st), ") Z ") {
					pids = append(pids, e.Name())
				}
			}
		}
		return pids
	}
	// fio has started its job: a second process, or a second thread.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		pids := reading()
		if len(pids) > 1 {
			break
		}
		if len(pids) == 1 {
			if tasks, _ := os.ReadDir(filepath.Join("/proc", pids[0], "task")); len(tasks) > 1 {
				break
			}
		}
		if time.Since(start) > time.Minute {
			t.Fatal("no fio job reading the file after a minute")
		}
	}
	time.Sleep(time.Second)
	cancel()
	select {
	case err := <-ended:
		t.Logf("runFio after the cancel: %v", err)
	case <-time.After(time.Minute):
		t.Fatalf("runFio still waits a minute after its context ended; fio processes: %v", reading())
	}
	for start := time.Now(); len(reading()) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Errorf("30 s after runFio returned, fio processes still read the file: %v", reading())
			for _, p := range reading() {
				if n, err := strconv.Atoi(p); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			break
		}
	}
}

// TestFioJobsPerQueue: with --qps 4 fio reads the namespace in 4 jobs,
// each over its own quarter (--offset_increment) at a quarter of the
// depth, reported as one, and the whole of it once; with 1 queue, one job
// over all of it at the whole depth.
func TestFioJobsPerQueue(t *testing.T) {
	o := nvmeofReadOptions{blockSize: 64 << 10, size: 8 << 20, depth: 8, qps: 4}
	args := " " + strings.Join(fioArgs(o, "/dev/nvme1n1"), " ") + " "
	for _, w := range []string{" --numjobs=4 ", " --iodepth=2 ", " --size=2097152 ", " --offset_increment=2097152 ", " --group_reporting ", " --direct=1 "} {
		if !strings.Contains(args, w) {
			t.Errorf("qps 4: fio's arguments lack %q: %s", w, args)
		}
	}
	o.total = 4 << 20
	if args := " " + strings.Join(fioArgs(o, "/dev/nvme1n1"), " ") + " "; !strings.Contains(args, " --io_size=1048576 ") {
		t.Errorf("qps 4, total 4 MiB: want 1 MiB a job: %s", args)
	}
	o.qps, o.total = 1, 0
	args = " " + strings.Join(fioArgs(o, "/dev/nvme1n1"), " ") + " "
	if strings.Contains(args, "--numjobs") || strings.Contains(args, "--offset_increment") || !strings.Contains(args, " --iodepth=8 ") || !strings.Contains(args, " --size=8388608 ") {
		t.Errorf("qps 1: want one job over the whole namespace at depth 8: %s", args)
	}

	testenv.NeedTool(t, "fio", "fio")
	file := filepath.Join(t.TempDir(), "ns")
	if err := os.WriteFile(file, make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	o.qps = 4
	out, err := runFio(context.Background(), o, file)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Jobs []struct {
			Read struct {
				IOBytes int64 `json:"io_bytes"`
			} `json:"read"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Jobs) != 1 || rep.Jobs[0].Read.IOBytes != 8<<20 {
		t.Fatalf("fio's report: %v, %+v; want one group that read the 8 MiB once", err, rep.Jobs)
	}
}
