package point

import (
	"context"
	"sync"
	"testing"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
)

// prestartHost is Local with remote.Prestarter, as Slurm has it: each
// Pending starts its command with Local when given it, and the host counts
// how each ended.
type prestartHost struct {
	remote.Local
	mu                        sync.Mutex
	prestarted, used, dropped int
}

func (h *prestartHost) Prestart(ctx context.Context, path string) remote.Pending {
	h.mu.Lock()
	h.prestarted++
	h.mu.Unlock()
	return &localPending{h: h}
}

type localPending struct {
	h    *prestartHost
	once sync.Once
}

func (p *localPending) end(used bool) (first bool) {
	p.once.Do(func() {
		first = true
		p.h.mu.Lock()
		if used {
			p.h.used++
		} else {
			p.h.dropped++
		}
		p.h.mu.Unlock()
	})
	return first
}

func (p *localPending) Start(ctx context.Context, argv []string) (remote.Process, error) {
	p.end(true)
	return p.h.Local.Start(ctx, argv)
}

func (p *localPending) Close() error { p.end(false); return nil }

// With a Prestarter host, every node role of a point is started through a
// Pending taken at the point's start; the Pendings of roles that never
// start (their server failed) are closed, none left open.
func TestRunPrestarts(t *testing.T) {
	for _, c := range []struct {
		name, server              string
		ok                        bool
		prestarted, used, dropped int
	}{
		{"fan-in", "{file: %s/f.dat, file_size: 1MiB, create: true, cache: warm}", true, 3, 3, 0},
		{"server fails", "{file: %s/missing.dat, file_size: 1MiB}", false, 3, 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, pts, rec := localRunner(t, `name: t
hosts:
  server: {address: local}
  client: [{address: local}, {address: local}]
server: `+c.server+`
client: {block_size: 64KiB, queue_depth: 4, duration: 200ms, verify: true}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
			h := &prestartHost{}
			for i := range r.Targets {
				r.Targets[i].Host = h
			}
			rows, _, err := r.Run(context.Background(), pts[0], 1)
			if err != nil || len(rows) != 3 || (rows[2].Status == results.StatusOK) != c.ok {
				t.Fatalf("rows %+v, %v", rows, err)
			}
			if h.prestarted != c.prestarted || h.used != c.used || h.dropped != c.dropped {
				t.Errorf("pendings: %d prestarted, %d started, %d closed; want %d, %d, %d",
					h.prestarted, h.used, h.dropped, c.prestarted, c.used, c.dropped)
			}
			if l := rec.leftover(); l != "" {
				t.Errorf("nodes left: %s", l)
			}
		})
	}
}
