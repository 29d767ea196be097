package tcp

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/node/region"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// io direct over tcp: a cold 48 MiB file (3 regions of 16 MiB) through a
// ring of 2 buffers, read once and verified:
//   - deep: 40 MiB in flight, more than the ring holds, so the server
//     must send what it holds before it waits for a buffer to refill
//     (waiting first deadlocks);
//   - paced: at 200 MB/s, far slower than the disk, so a buffer refilled
//     before its region was sent would send the next region's bytes.
//
// The readers' figures reach the server's stats, and the page cache holds
// none of the file. Reading it again is refused, saying why.
func TestDirect(t *testing.T) {
	for _, c := range []struct {
		name string
		qd   int
		rate float64
	}{{"deep", 40, 0}, {"paced", 4, 200e6 / (1 << 20)}} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f, err := region.Open(ctx, filepath.Join(t.TempDir(), "region.dat"), region.Options{Size: 48 << 20, Create: true})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.DropCache(); err != nil {
				t.Fatal(err)
			}
			tr := New()
			srv, err := tr.Listen(ctx, transport.ServerConfig{
				Region: transport.Region{File: f.File, Path: f.Path, Size: f.Size, Seed: f.Seed, Patterned: f.Patterned},
				Host:   "127.0.0.1", AcceptTimeout: 10 * time.Second, IO: results.IODirect, Window: 2,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			type served struct {
				st  transport.ServeStats
				err error
			}
			done := make(chan served, 1)
			go func() { st, err := srv.Serve(ctx); done <- served{st, err} }()
			cl, err := tr.Dial(ctx, transport.ClientConfig{Addr: "127.0.0.1:" + strconv.Itoa(srv.Ready().Port), QPs: 1, QueueDepth: c.qd, BlockSize: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			w := transport.Workload{BlockSize: 1 << 20, QueueDepth: c.qd, Pattern: "sequential", Total: f.Size, Verify: true, Rate: c.rate}
			m, err := cl.Read(ctx, w)
			if err != nil || !m.Verified || m.Bytes != f.Size {
				t.Fatalf("read: %d bytes, verified %v, %v; want the 48 MiB file verified", m.Bytes, m.Verified, err)
			}
			w.Rate = 0
			if _, err := cl.Read(ctx, w); err == nil {
				t.Error("a second pass over an io direct server: no error")
			}
			cl.Close()
			s := <-done
			if s.err == nil || !strings.Contains(s.err.Error(), "once") {
				t.Errorf("serve after a second pass: %v; want it to say the file is served once", s.err)
			}
			p := s.st.Pipeline
			if p == nil || p.Regions != 3 || p.Window != 2 || p.PopulateS == nil || *p.PopulateS <= 0 || len(p.Timeline) != 3 {
				t.Fatalf("serve stats' pipeline %+v; want 3 regions through 2 buffers, the reads timed", p)
			}
			if res, err := f.Residency(); err != nil || res > 0.05 {
				t.Errorf("residency %.3f after the stream (%v); want the page cache left alone", res, err)
			}
		})
	}
}
