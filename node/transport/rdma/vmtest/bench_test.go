//go:build bench

package vmtest

import (
	"context"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBench boots the guest and runs ib_read_bw and node read side by side
// at 4 KiB, 64 KiB and 1 MiB (package guest, TestBench), printing each pair
// and the ratio node ÷ ib_read_bw. Run it with `go test -tags bench -run
// TestBench -v`. Under TCG the figures say how much CPU each program's loop
// costs, nothing about RDMA hardware.
func TestBench(t *testing.T) {
	needHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := EnsureImage(ctx, Bookworm, testLog{t}); err != nil {
		t.Fatal(err)
	}
	node, tests := buildBinaries(t, ctx, "bench")
	var console consoleLog
	g, err := Boot(ctx, Options{
		Files:   map[string]File{"/vmtest/node": {Host: node, Mode: 0o755}, "/vmtest/guest.test": {Host: tests, Mode: 0o755}},
		Run:     "#!/bin/sh\nexport NODE=/vmtest/node\nexec /vmtest/guest.test -test.v -test.run '^TestBench$' -test.timeout 25m\n",
		Console: &console, Log: testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	err = g.Wait(ctx)
	out := console.String()
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "BENCH ") {
			t.Log(strings.TrimSpace(l))
			os.Stdout.WriteString(l + "\n")
			n++
			// A ratio is only a figure when both sides measured something.
			r := math.NaN()
			if m := regexp.MustCompile(` ratio=(\S+)`).FindStringSubmatch(l); m != nil {
				r, _ = strconv.ParseFloat(m[1], 64)
			}
			if !(r > 0) || math.IsInf(r, 0) {
				t.Errorf("BENCH line without a finite, positive ratio: %s", l)
			}
		}
	}
	if err != nil {
		t.Fatalf("guest: %v; console:\n%s", err, out)
	}
	if n != 3 {
		t.Fatalf("%d BENCH lines, want 3; console:\n%s", n, out)
	}
}
