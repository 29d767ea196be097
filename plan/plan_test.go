package plan

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// minimalYAML is the least a valid plan says; tests append to it.
const minimalYAML = `name: t
hosts:
  server: {address: local}
  client: {address: local}
server: {file: /tmp/t.dat, file_size: 64MiB}
`

func mustParse(t *testing.T, yaml string, opts Options) *Plan {
	t.Helper()
	p, err := Parse("t.yaml", []byte(yaml), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func mustExpand(t *testing.T, p *Plan, opts ExpandOptions) []Point {
	t.Helper()
	pts, err := Expand(p, opts)
	if err != nil {
		t.Fatalf("Expand: %v", err)
	}
	return pts
}

// swept renders each point's swept parameters as "a=1 b=2", one per point.
func swept(pts []Point) []string {
	var out []string
	for _, pt := range pts {
		var parts []string
		for _, p := range pt.Swept {
			parts = append(parts, p.Name+"="+p.Value)
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func TestDefaults(t *testing.T) {
	t.Setenv("HOME", "/home/tester")
	p := mustParse(t, minimalYAML, Options{NodeBinary: "/opt/bin/node"})
	want := &Plan{
		Path:     "t.yaml",
		Name:     "t",
		Source:   []byte(minimalYAML),
		Launcher: "ssh",
		Hosts:    Hosts{Servers: []Host{{Address: "local", Params: hostDefaults()}}, Clients: []Host{{Address: "local", Params: hostDefaults()}}, listed: map[string]bool{}},
		SSH:      SSH{ConnectTimeout: 10 * time.Second},
		Node:     Node{Binary: "/opt/bin/node", RemotePath: "/var/tmp/rdmasweep-{uid}/node"},
		Base:     withValues(defaults, map[string]value{"file": {s: "/tmp/t.dat"}, "file_size": {n: 64 << 20}}),
		Repeat:   1,
		Timeouts: Timeouts{Ready: 2 * time.Minute, Accept: time.Minute, Point: 10 * time.Minute},
		Output:   Output{CSV: "out/t.csv", Logs: "out/logs"},
	}
	// The defaults, spelled out as a user reads them in docs/plan.md.
	for name, want := range map[string]string{
		"transport": "tcp", "cache": "cold", "registration": "pinned", "create": "false", "port": "0",
		"block_size": "1MiB", "queue_depth": "16", "qps": "1", "pattern": "sequential", "total": "0",
		"duration": "0s", "warmup": "0s", "verify": "false", "device": "", "ib_port": "auto", "gid_index": "auto",
	} {
		if got := format(paramByName(name), defaults.get(name)); got != want {
			t.Errorf("default %s = %q, want %q", name, got, want)
		}
	}
	p.sweep, p.written, p.origin = sweep{}, nil, nil
	if !reflect.DeepEqual(p, want) {
		t.Errorf("defaults:\ngot  %+v\nwant %+v", p, want)
	}
	if !p.Hosts.Server().IsLocal() || !p.Hosts.Client().IsLocal() {
		t.Error("address local: IsLocal is false")
	}
	pts := mustExpand(t, p, ExpandOptions{})
	if len(pts) != 1 || len(pts[0].Swept) != 0 {
		t.Fatalf("a plan without sweep: got %d points (%v), want 1 with nothing swept", len(pts), swept(pts))
	}
	if got := pts[0].Hosts.Server().DataAddress; got != "127.0.0.1" {
		t.Errorf("local server data_address = %q, want 127.0.0.1", got)
	}
	if got, want := pts[0].ExpectedReads(), int64(64); got != want {
		t.Errorf("ExpectedReads = %d, want file_size/block_size = %d", got, want)
	}
}

func TestFullSchema(t *testing.T) {
	t.Setenv("HOME", "/home/alice")
	p, err := Load("testdata/good/full.yaml", Options{NodeBinary: "/ignored/node"})
	if err != nil {
		t.Fatal(err)
	}
	wantServer := Host{Address: "10.0.0.1", Port: 22, User: "alice", IdentityFile: "/home/alice/.ssh/id_ed25519",
		Jump: "alice@bastion:22", DataAddress: "192.168.100.1", CPUs: "0-3,8",
		Params: withValues(hostDefaults(), map[string]value{"device": {s: "mlx5_1"}, "ib_port": {n: 1}, "gid_index": {n: 3}})}
	wantClient := Host{Address: "10.0.0.2", User: "alice",
		Params: withValues(hostDefaults(), map[string]value{"device": {s: "mlx5_0"}, "ib_port": {n: 1}, "gid_index": {n: 3}})}
	if !reflect.DeepEqual(p.Hosts.Server(), wantServer) {
		t.Errorf("server host:\ngot  %+v\nwant %+v", p.Hosts.Server(), wantServer)
	}
	if !reflect.DeepEqual(p.Hosts.Client(), wantClient) {
		t.Errorf("client host (inherits plan-level rdma):\ngot  %+v\nwant %+v", p.Hosts.Client(), wantClient)
	}
	if p.Hosts.Server().IsLocal() {
		t.Error("10.0.0.1 IsLocal")
	}
	if p.Node != (Node{Binary: "bin/node", RemotePath: "/opt/rdmasweep/node"}) {
		t.Errorf("node = %+v; a written node.binary must win over Options.NodeBinary", p.Node)
	}
	if p.Transport() != "rdma" || p.Description != "free text" || p.Name != "ssd-sweep" {
		t.Errorf("transport, description, name = %q, %q, %q", p.Transport(), p.Description, p.Name)
	}
	if p.SSH.KnownHosts != "/home/alice/.ssh/known_hosts" {
		t.Errorf("known_hosts = %q, want ~ expanded", p.SSH.KnownHosts)
	}
	pts := mustExpand(t, p, ExpandOptions{})
	if len(pts) != 26 {
		t.Fatalf("got %d points, want 2 caches x 13 block sizes", len(pts))
	}
	first, last := pts[0], pts[25]
	if first.Values.Str(param.Cache) != "cold" || first.Values.Int(param.BlockSize) != 16<<20 || first.Values.Int(param.FileSize) != 4<<30 {
		t.Errorf("first point = %v, want cold, 16MiB, 4GiB", swept(pts[:1]))
	}
	if last.Values.Str(param.Cache) != "warm" || last.Values.Int(param.BlockSize) != 4<<10 || last.Values.Int(param.FileSize) != 1<<20 {
		t.Errorf("last point = %v, want warm, 4KiB, 1MiB", swept(pts[25:]))
	}
	if got := first.Hosts.Server().DataAddress; got != "192.168.100.1" {
		t.Errorf("written data_address became %q", got)
	}
}

// TestOrder checks that matrix parameters are outermost in the order
// written and the zip group innermost, whatever order the plan lists
// zip and matrix in.
func TestOrder(t *testing.T) {
	for _, zipFirst := range []bool{false, true} {
		matrix := "  matrix:\n    cache: [cold, warm]\n    pattern: [sequential, random]\n"
		zip := "  zip:\n    block_size: [4KiB, 8KiB]\n    queue_depth: [1, 2]\n"
		body := "sweep:\n" + matrix + zip
		if zipFirst {
			body = "sweep:\n" + zip + matrix
		}
		p := mustParse(t, minimalYAML+body, Options{})
		var got []string
		for _, pt := range mustExpand(t, p, ExpandOptions{}) {
			got = append(got, fmt.Sprintf("%s/%s/%s/%d", pt.Values.Str(param.Cache), pt.Values.Str(param.Pattern), results.FormatSize(pt.Values.Int(param.BlockSize)), pt.Values.Int(param.QueueDepth)))
		}
		want := []string{
			"cold/sequential/4KiB/1", "cold/sequential/8KiB/2", "cold/random/4KiB/1", "cold/random/8KiB/2",
			"warm/sequential/4KiB/1", "warm/sequential/8KiB/2", "warm/random/4KiB/1", "warm/random/8KiB/2",
		}
		if !slices.Equal(got, want) {
			t.Errorf("zip first=%v: order\ngot  %v\nwant %v", zipFirst, got, want)
		}
	}
}

// TestWorkloadVariesFastest holds issue 14's rule: wherever workload is
// written in the matrix (first, between, last), it varies fastest, inside
// the zip too, so every node point runs right beside its peer points.
func TestWorkloadVariesFastest(t *testing.T) {
	want := []string{
		"cold/4KiB/node", "cold/4KiB/iperf3", "cold/8KiB/node", "cold/8KiB/iperf3",
		"warm/4KiB/node", "warm/4KiB/iperf3", "warm/8KiB/node", "warm/8KiB/iperf3",
	}
	zip := "  zip:\n    block_size: [4KiB, 8KiB]\n"
	for _, body := range []string{
		"sweep:\n  matrix:\n    workload: [node, iperf3]\n    cache: [cold, warm]\n" + zip,
		"sweep:\n  matrix:\n    cache: [cold, warm]\n    workload: [node, iperf3]\n" + zip,
		"sweep:\n" + zip + "  matrix:\n    workload: [node, iperf3]\n    cache: [cold, warm]\n",
	} {
		p := mustParse(t, minimalYAML+body, Options{})
		var got []string
		for _, pt := range mustExpand(t, p, ExpandOptions{}) {
			got = append(got, fmt.Sprintf("%s/%s/%s", pt.Values.Str(param.Cache), results.FormatSize(pt.Values.Int(param.BlockSize)), pt.Values.Str(param.Workload)))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: order\ngot  %v\nwant %v", body, got, want)
		}
		// --only keeps the order among what is left.
		got = nil
		for _, pt := range mustExpand(t, p, ExpandOptions{Only: []string{"workload=iperf3,node", "cache=warm"}}) {
			got = append(got, pt.Values.Str(param.Workload))
		}
		if !slices.Equal(got, []string{"node", "iperf3", "node", "iperf3"}) {
			t.Errorf("--only: %v", got)
		}
	}
}

func TestSweptIsInPlanOrder(t *testing.T) {
	p := mustParse(t, minimalYAML+"sweep:\n  zip:\n    block_size: [4KiB]\n  matrix:\n    cache: [warm]\n", Options{})
	if got, want := swept(mustExpand(t, p, ExpandOptions{})), []string{"block_size=4KiB cache=warm"}; !slices.Equal(got, want) {
		t.Errorf("Swept = %v, want %v", got, want)
	}
	for i, pt := range mustExpand(t, p, ExpandOptions{}) {
		if pt.Index != i {
			t.Errorf("point %d has Index %d", i, pt.Index)
		}
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		name, sweep string
		want        []string
		set         []string
	}{
		{"halving sizes", "zip: {block_size: {from: 4MiB, to: 512KiB, factor: 0.5}}",
			[]string{"block_size=4MiB", "block_size=2MiB", "block_size=1MiB", "block_size=512KiB"}, nil},
		{"doubling ints", "matrix: {queue_depth: {from: 1, to: 8, factor: 2}}",
			[]string{"queue_depth=1", "queue_depth=2", "queue_depth=4", "queue_depth=8"}, nil},
		{"from equals to", "matrix: {qps: {from: 4, to: 4, factor: 2}}",
			[]string{"qps=4"}, nil},
		{"factor 1.5 on whole bytes", "zip: {block_size: {from: 4KiB, to: 9KiB, factor: 1.5}}",
			[]string{"block_size=4KiB", "block_size=6KiB", "block_size=9KiB"}, []string{"file_size=36KiB"}},
		{"decimal units, shown in bytes", "zip: {block_size: {from: 1MB, to: 4MB, factor: 2}}",
			[]string{"block_size=1000000", "block_size=2000000", "block_size=4000000"}, []string{"file_size=4MB"}},
		{"open range takes the zip length", "zip: {total: {from: 1GiB, factor: 0.25}, block_size: [1MiB, 2MiB, 4MiB]}",
			[]string{"total=1GiB block_size=1MiB", "total=256MiB block_size=2MiB", "total=64MiB block_size=4MiB"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, minimalYAML+"sweep:\n  "+tc.sweep+"\n", Options{Set: tc.set})
			if got := swept(mustExpand(t, p, ExpandOptions{})); !slices.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestAliasHosts(t *testing.T) {
	p, err := Load("testdata/good/crossed.yaml", Options{Set: []string{"hosts.client.address=db2"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Hosts.Server().Address != "db1" || p.Hosts.Client().Address != "db2" || p.Hosts.Client().User != "bob" {
		t.Errorf("hosts = %+v; a --set through an alias must change only that use", p.Hosts)
	}
	pts := mustExpand(t, p, ExpandOptions{HostName: func(a string) string { return a + ".lab" }})
	if len(pts) != 12 {
		t.Errorf("got %d points, want 12", len(pts))
	}
	if got := pts[0].Hosts.Server().DataAddress; got != "db1.lab" {
		t.Errorf("data_address default = %q, want HostName(address)", got)
	}
	if pts[0].ExpectedReads() != 0 {
		t.Errorf("duration-based point: ExpectedReads = %d, want 0", pts[0].ExpectedReads())
	}
}

func TestSet(t *testing.T) {
	const sweepYAML = minimalYAML + `client: {queue_depth: 4}
sweep:
  zip:
    block_size: [4KiB, 8KiB, 16KiB]
    total: {from: 4MiB, factor: 2}
  matrix:
    cache: [cold, warm]
`
	for _, tc := range []struct {
		name  string
		set   []string
		check func(*Plan, []Point) string
	}{
		{"parameter", []string{"queue_depth=32"}, func(p *Plan, pts []Point) string {
			if p.Base.Int(param.QueueDepth) != 32 || pts[0].Values.Int(param.QueueDepth) != 32 {
				return fmt.Sprint("queue_depth ", p.Base.Int(param.QueueDepth))
			}
			return ""
		}},
		{"section path", []string{"client.queue_depth=8", "server.create=true"}, func(p *Plan, _ []Point) string {
			if p.Base.Int(param.QueueDepth) != 8 || !p.Base.Bool(param.Create) {
				return fmt.Sprintf("%+v", p.Base)
			}
			return ""
		}},
		{"swept matrix parameter replaces its sweep", []string{"cache=warm"}, func(p *Plan, pts []Point) string {
			if got := swept(pts); len(pts) != 3 || pts[0].Values.Str(param.Cache) != "warm" || strings.Contains(strings.Join(got, " "), "cache") {
				return fmt.Sprint(got)
			}
			return ""
		}},
		{"swept size in bytes", []string{"total=1048576", "block_size=64KiB"}, func(p *Plan, pts []Point) string {
			if len(pts) != 2 || pts[0].Values.Int(param.BlockSize) != 64<<10 || pts[0].Values.Int(param.Total) != 1<<20 {
				return fmt.Sprint(swept(pts))
			}
			return ""
		}},
		{"dotted paths", []string{"ssh.connect_timeout=5s", "hosts.server.address=10.1.1.1", "hosts.server.port=2222", "hosts.client.rdma.gid_index=1", "timeouts.point=20m", "verify=true", "description=a b"}, func(p *Plan, _ []Point) string {
			if p.SSH.ConnectTimeout != 5*time.Second || p.Hosts.Server().Address != "10.1.1.1" || p.Hosts.Server().Port != 2222 ||
				p.Hosts.Client().Params.Int(param.GIDIndex) != 1 || p.Hosts.Server().Params.Int(param.GIDIndex) != -1 ||
				p.Timeouts.Point != 20*time.Minute || !p.Base.Bool(param.Verify) || p.Description != "a b" {
				return fmt.Sprintf("%+v", p)
			}
			return ""
		}},
		{"later wins", []string{"repeat=2", "repeat=3"}, func(p *Plan, _ []Point) string {
			if p.Repeat != 3 {
				return fmt.Sprint("repeat ", p.Repeat)
			}
			return ""
		}},
		{"whole values: expect and search", []string{"expect=[{metric: bandwidth_mb_s, at_least: 0.9 line_rate, unknown: pass}]",
			"search={param: queue_depth, from: 1, to: 8, until: {metric: lat_p99_us, at_most: 500}}"}, func(p *Plan, _ []Point) string {
			if len(p.Expect) != 1 || !p.Expect[0].LineRate || !p.Expect[0].UnknownPasses || p.Search == nil || p.Search.Param != "queue_depth" {
				return fmt.Sprintf("expect %+v, search %+v", p.Expect, p.Search)
			}
			return ""
		}},
		{"creates missing sections", []string{"rdma.device=mlx5_2", "output.csv=~/r.csv"}, func(p *Plan, _ []Point) string {
			if p.Hosts.Server().Params.Str(param.Device) != "mlx5_2" || p.Output.CSV != "/home/setter/r.csv" {
				return fmt.Sprintf("%+v %+v", p.Hosts.Server().Params, p.Output)
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HOME", "/home/setter")
			p := mustParse(t, sweepYAML, Options{Set: tc.set})
			if msg := tc.check(p, mustExpand(t, p, ExpandOptions{})); msg != "" {
				t.Errorf("--set %v: got %s", tc.set, msg)
			}
		})
	}

	// Replacing every swept parameter leaves one point, not an empty-sweep error.
	p := mustParse(t, sweepYAML, Options{Set: []string{"block_size=4KiB", "total=4MiB", "cache=cold"}})
	if pts := mustExpand(t, p, ExpandOptions{}); len(pts) != 1 {
		t.Errorf("every swept parameter --set: got %d points, want 1", len(pts))
	}
}

// TestSetPool: --set hosts.pool makes a pool plan of a pair plan once
// its server and client are gone; an error inside a whole value set by
// --set is the flag's, at the value's own path.
func TestSetPool(t *testing.T) {
	p := mustParse(t, `name: p
server: {file: /tmp/x, file_size: 1MiB}
`, Options{Set: []string{"hosts.pool=[n1, n2, n3]", "topology=ring"}})
	if len(p.Hosts.Pool) != 3 || p.Hosts.Pool[2].Address != "n3" || !p.IsPool() {
		t.Errorf("hosts.pool %+v, pool %v; want n1..n3, a ring", p.Hosts.Pool, p.IsPool())
	}
	_, err := Parse("p.yaml", []byte(minimalYAML), Options{Set: []string{"expect=[{metric: bandwith_mb_s, at_least: 1}]"}})
	if err == nil || !strings.Contains(err.Error(), `--set: expect[0].metric: "bandwith_mb_s" is not a numeric result column (did you mean bandwidth_mb_s?)`) {
		t.Errorf("a bad metric under --set expect: %v", err)
	}
}

// A list given to --set is refused with what --set can do, not with the
// file's advice to write sweep.matrix, which --set cannot reach.
func TestSetList(t *testing.T) {
	_, err := Parse("p.yaml", []byte(minimalYAML), Options{Set: []string{"cq_moderation=[1, 16]"}})
	if err == nil {
		t.Fatal("--set cq_moderation=[1, 16] was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "--set: cq_moderation: must be a single value (got a list)") ||
		!strings.Contains(msg, "edit the plan's sweep.matrix.cq_moderation") || strings.Contains(msg, "sweep.zip") {
		t.Errorf("got %q", msg)
	}
}

func TestOnly(t *testing.T) {
	p := mustParse(t, minimalYAML+`sweep:
  zip:
    block_size: [1MiB, 2MiB, 4MiB]
  matrix:
    cache: [cold, warm]
    queue_depth: [1, 16]
`, Options{})
	for _, tc := range []struct {
		only []string
		want []string
	}{
		{[]string{"block_size=1048576"}, []string{
			"block_size=1MiB cache=cold queue_depth=1", "block_size=1MiB cache=cold queue_depth=16",
			"block_size=1MiB cache=warm queue_depth=1", "block_size=1MiB cache=warm queue_depth=16"}},
		{[]string{"block_size=4MiB,1MiB", "cache=warm", "queue_depth=16"}, []string{
			"block_size=1MiB cache=warm queue_depth=16", "block_size=4MiB cache=warm queue_depth=16"}},
		{[]string{"pattern=sequential", "cache=cold", "queue_depth=1"}, []string{ // pattern is not swept but matches
			"block_size=1MiB cache=cold queue_depth=1", "block_size=2MiB cache=cold queue_depth=1", "block_size=4MiB cache=cold queue_depth=1"}},
	} {
		pts := mustExpand(t, p, ExpandOptions{Only: tc.only})
		if got := swept(pts); !slices.Equal(got, tc.want) {
			t.Errorf("--only %v:\ngot  %v\nwant %v", tc.only, got, tc.want)
		}
		// A filtered point is the same point, with the same key, as in the
		// full expansion.
		all := map[string]Point{}
		for _, pt := range mustExpand(t, p, ExpandOptions{}) {
			all[pt.Key] = pt
		}
		for i, pt := range pts {
			if full, ok := all[pt.Key]; !ok || !reflect.DeepEqual(full.Swept, pt.Swept) {
				t.Errorf("--only %v: point %v has key %s, which the full expansion gives to %v", tc.only, pt.Swept, pt.Key, full.Swept)
			}
			if pt.Index != i {
				t.Errorf("--only %v: point %d has Index %d, want its place in the result", tc.only, i, pt.Index)
			}
		}
	}
	// The limit applies after --only: a narrowed sweep within it runs.
	if pts, err := Expand(p, ExpandOptions{Only: []string{"cache=cold"}, MaxPoints: 6}); err != nil || len(pts) != 6 {
		t.Errorf("MaxPoints 6 with --only leaving 6: got %d points, %v", len(pts), err)
	}
	if _, err := Expand(p, ExpandOptions{MaxPoints: 11}); err == nil {
		t.Error("12 points with MaxPoints 11: no error")
	}
}

func TestKeys(t *testing.T) {
	base := minimalYAML + "sweep:\n  matrix:\n    cache: [cold, warm]\n"
	keys := func(yaml string, opts Options, eopts ExpandOptions) []string {
		var out []string
		for _, pt := range mustExpand(t, mustParse(t, yaml, opts), eopts) {
			if len(pt.Key) != 16 || strings.Trim(pt.Key, "0123456789abcdef") != "" {
				t.Errorf("key %q is not 16 hex digits", pt.Key)
			}
			out = append(out, pt.Key)
		}
		return out
	}
	k := keys(base, Options{}, ExpandOptions{})
	if k[0] == k[1] {
		t.Error("two points share a key")
	}
	if !slices.Equal(k, keys(base, Options{}, ExpandOptions{})) {
		t.Error("the same plan gave different keys")
	}
	for _, same := range []struct {
		name string
		opts Options
		yaml string
	}{
		{"repeat", Options{Set: []string{"repeat=5"}}, base},
		{"description", Options{Set: []string{"description=x"}}, base},
		{"timeouts", Options{Set: []string{"timeouts.point=1h"}}, base},
		{"output", Options{Set: []string{"output.csv=o.csv"}}, base},
		{"ssh", Options{Set: []string{"ssh.connect_timeout=1s"}}, base},
		{"sizes written differently", Options{}, strings.Replace(base, "64MiB", "67108864", 1)},
		{"defaults written out", Options{}, base + "client: {block_size: 1MiB, pattern: sequential}\n"},
	} {
		if got := keys(same.yaml, same.opts, ExpandOptions{}); !slices.Equal(got, k) {
			t.Errorf("%s changed the keys: %v -> %v", same.name, k, got)
		}
	}
	for _, set := range []string{"name=u", "transport=rdma", "hosts.client.address=h", "hosts.server.port=2",
		"hosts.server.data_address=10.9.9.9", "rdma.gid_index=0", "hosts.client.cpus=1", "file=/tmp/u.dat",
		"create=true", "port=7000", "queue_depth=2", "verify=true", "warmup=1s", "registration=odp"} {
		got := keys(base, Options{Set: []string{set}}, ExpandOptions{})
		if got[0] == k[0] || got[1] == k[1] {
			t.Errorf("--set %s left a key unchanged: %v -> %v", set, k, got)
		}
	}
	remote := strings.Replace(base, "server: {address: local}", "server: {address: alias}", 1)
	if a, b := keys(remote, Options{}, ExpandOptions{}), keys(remote, Options{}, ExpandOptions{HostName: func(string) string { return "real" }}); slices.Equal(a, b) {
		t.Error("the resolved data_address is not part of the key")
	}
}

func TestSweepableParams(t *testing.T) {
	want := []string{"file_size", "block_size", "queue_depth", "qps", "pattern", "cache", "registration", "total", "duration", "warmup", "clients", "workload",
		"max_rd_atomic", "cq_moderation", "relaxed_ordering", "odp_prefetch", "mr_size", "rate", "arrivals", "populate", "pipeline", "window", "io"}
	if got := results.SweepableParams(); !slices.Equal(got, want) {
		t.Errorf("SweepableParams = %v, want the CSV order %v", got, want)
	}
}

// withValues is v with some values replaced.
func withValues(v Values, set map[string]value) Values {
	out := v.clone()
	for k, x := range set {
		out.set(k, x)
	}
	return out
}

// hostDefaults are a host's per-host parameters at their defaults.
func hostDefaults() Values {
	h := Values{map[string]value{}}
	for _, name := range sectionKeys("rdma", true) {
		h.set(name, defaults.get(name))
	}
	return h
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "plans/x.yaml", Line: 14, Col: 7, Path: "sweep.zip.block_size.to", Msg: `must be a size like 4KiB (got "4kb")`},
			`plans/x.yaml:14:7: sweep.zip.block_size.to: must be a size like 4KiB (got "4kb")`},
		{Error{File: "x.yaml", Line: 3, Msg: "syntax error: boom"}, "x.yaml:3: syntax error: boom"},
		{Error{File: "--set", Path: "blok_size", Msg: "unknown parameter or field"}, "--set: blok_size: unknown parameter or field"},
		{Error{File: "x.yaml", Msg: "plan is empty"}, "x.yaml: plan is empty"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestAllErrorsAtOnce checks that problems all over a plan come back
// together, sorted by position, one line each.
func TestAllErrorsAtOnce(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`name: x
hosts:
  server: {address: local, port: 0}
  client: {address: local}
server: {file: /f, file_size: 4kb}
client: {qps: 0, pattern: zigzag}
transport: ib
`), Options{Set: []string{"nope=1"}})
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	var where []string
	for _, e := range list {
		where = append(where, fmt.Sprintf("%s:%d:%d:%s", e.File, e.Line, e.Col, e.Path))
	}
	want := []string{"--set:0:0:nope", "x.yaml:3:34:hosts.server.port", "x.yaml:5:31:server.file_size",
		"x.yaml:6:15:client.qps", "x.yaml:6:27:client.pattern", "x.yaml:7:12:transport"}
	if !slices.Equal(where, want) {
		t.Errorf("errors at\n%v\nwant\n%v\n(full: %v)", where, want, err)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != len(want) {
		t.Errorf("Error() has %d lines, want %d", got, len(want))
	}
}

func TestLoadMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(missing, Options{})
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].File != missing || !strings.Contains(list[0].Msg, "no such file") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestHostDetails(t *testing.T) {
	for _, jump := range []string{"bastion", "alice@bastion", "bastion:2222", "alice@bastion:22", "[fe80::1]:22", "alice@[::1]", "a.b.example"} {
		if msg := checkJump(jump); msg != "" {
			t.Errorf("jump %q: %s", jump, msg)
		}
	}
	for _, jump := range []string{"", "@b", "a@", "b:", "b:0", "b:65536", "a@b@c", "[::1", "[::1]x", "::1", "a b", "b:x"} {
		if checkJump(jump) == "" {
			t.Errorf("jump %q accepted", jump)
		}
	}
	for _, cpus := range []string{"0", "0-3", "0-3,8", "1,2,3", "4-4"} {
		if !validCPUList(cpus) {
			t.Errorf("cpus %q refused", cpus)
		}
	}
	for _, cpus := range []string{"", "3-1", "a", "0,", ",0", "0-", "-1", "0--1", "+1", "1 2"} {
		if validCPUList(cpus) {
			t.Errorf("cpus %q accepted", cpus)
		}
	}
}

// TestSetThenOnly pins how the two combine: --set changes the plan first
// (a swept parameter set to one value stops being swept), then the sweep
// is expanded, then --only keeps the matching points.
func TestSetThenOnly(t *testing.T) {
	yaml := minimalYAML + `sweep:
  zip:
    block_size: [1MiB, 2MiB, 4MiB]
  matrix:
    cache: [cold, warm]
`
	// --set a parameter that is not swept, and --only a swept one: the set
	// value is in every point that is kept.
	p := mustParse(t, yaml, Options{Set: []string{"queue_depth=4"}})
	pts := mustExpand(t, p, ExpandOptions{Only: []string{"block_size=2MiB"}})
	if got := swept(pts); !slices.Equal(got, []string{"block_size=2MiB cache=cold", "block_size=2MiB cache=warm"}) {
		t.Fatalf("--set queue_depth=4 --only block_size=2MiB: %v", got)
	}
	for _, pt := range pts {
		if pt.Values.Int(param.QueueDepth) != 4 {
			t.Errorf("point %v: queue_depth %d, want the --set 4", pt.Swept, pt.Values.Int(param.QueueDepth))
		}
	}
	// --set a swept parameter: it leaves the sweep, so --only on it matches
	// only the set value.
	p = mustParse(t, yaml, Options{Set: []string{"cache=warm"}})
	pts = mustExpand(t, p, ExpandOptions{Only: []string{"cache=warm", "block_size=1MiB,4MiB"}})
	if got := swept(pts); !slices.Equal(got, []string{"block_size=1MiB", "block_size=4MiB"}) {
		t.Fatalf("--set cache=warm --only cache=warm,block_size=1MiB,4MiB: %v", got)
	}
	if _, err := Expand(p, ExpandOptions{Only: []string{"cache=cold"}}); err == nil {
		t.Error("--set cache=warm --only cache=cold: want an error (no point has cache=cold)")
	}
	// A key names the experiment, not how it was chosen: (1MiB, warm) by
	// --set and --only has the key (1MiB, warm) has in the full plan, whose
	// matrix puts cache outermost: cold ×3, then warm ×3.
	base := mustExpand(t, mustParse(t, yaml, Options{}), ExpandOptions{})
	if got := swept(base[3:4]); !slices.Equal(got, []string{"block_size=1MiB cache=warm"}) {
		t.Fatalf("full plan point 4: %v", got)
	}
	if pts[0].Key != base[3].Key {
		t.Errorf("(1MiB, warm) by --set/--only has key %s, in the full plan %s", pts[0].Key, base[3].Key)
	}
}

// TestCheckRefusalsArePositioned holds ExpandOptions.Check's contract: a
// refusal is reported where the refused value was written (the sweep's
// item, the plan's value, --set), at the workload's value for a default,
// once however many points share the place.
func TestCheckRefusalsArePositioned(t *testing.T) {
	body := `client: {verify: true}
sweep:
  matrix:
    workload: [node, ib_read_bw]
    block_size: [4KiB, 1MiB]
`
	check := func(pt Point) []Refusal {
		if pt.Values.Str(param.Workload) == "node" {
			return nil
		}
		var r []Refusal
		if pt.Values.Bool(param.Verify) {
			r = append(r, Refusal{"verify", "no verify here"})
		}
		if pt.Values.Int(param.BlockSize) == 4<<10 {
			r = append(r, Refusal{"block_size", "no 4KiB here"})
		}
		if pt.Values.Str(param.Pattern) == "sequential" {
			r = append(r, Refusal{"client.pattern", "only random"})
		}
		return r
	}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "t.yaml:6:18: client.verify: no verify here\n" +
			"t.yaml:9:22: sweep.matrix.workload: only random\n" +
			"t.yaml:10:18: sweep.matrix.block_size: no 4KiB here"},
		{[]string{"verify=true", "pattern=sequential"}, "--set: verify: no verify here\n--set: pattern: only random\n" +
			"t.yaml:10:18: sweep.matrix.block_size: no 4KiB here"},
	} {
		p := mustParse(t, minimalYAML+body, Options{Set: tc.set})
		_, err := Expand(p, ExpandOptions{Check: check})
		if err == nil || err.Error() != tc.want {
			t.Errorf("--set %v:\ngot  %v\nwant %s", tc.set, err, tc.want)
		}
	}
}

// TestSeveralClients: lists of hosts, the clients parameter and the roles'
// names; a list of one host keys as that host written alone.
func TestSeveralClients(t *testing.T) {
	p, err := Load("testdata/good/fan-in.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts := mustExpand(t, p, ExpandOptions{})
	var got []string
	for _, pt := range pts {
		got = append(got, fmt.Sprint(pt.Clients()))
	}
	if strings.Join(got, " ") != "1 2 4" || !p.Hosts.Several() {
		t.Fatalf("clients per point %v, several %v", got, p.Hosts.Several())
	}
	var names []string
	for _, r := range p.Hosts.Roles() {
		names = append(names, r.Name+"="+r.Host.Address)
	}
	if strings.Join(names, " ") != "server=s client1=c1 client2=c2 client3=c3 client4=c4" {
		t.Fatalf("roles %v", names)
	}
	if pts[0].For("client2").Str(param.Device) != "" || p.Hosts.Clients[1].User != "bob" {
		t.Fatalf("client2 %+v", p.Hosts.Clients[1])
	}
	if format(paramByName("clients"), defaults.get("clients")) != "all" {
		t.Fatal("clients' default is not written all")
	}

	pairs, err := Load("testdata/good/pairs.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	pp := mustExpand(t, pairs, ExpandOptions{})
	if len(pp) != 1 || pp[0].Clients() != 2 || pp[0].Hosts.Servers[1].DataAddress != "s2" {
		t.Fatalf("pairs: %+v", pp)
	}

	one := `name: t
hosts: {server: {address: s}, client: %s}
server: {file: /tmp/t.dat, file_size: 64MiB}
`
	a := mustExpand(t, mustParse(t, fmt.Sprintf(one, "{address: c}"), Options{}), ExpandOptions{})
	b := mustExpand(t, mustParse(t, fmt.Sprintf(one, "[{address: c}]"), Options{}), ExpandOptions{})
	if a[0].Key != b[0].Key {
		t.Errorf("one client written as a list keys %s, alone %s", b[0].Key, a[0].Key)
	}
	if !b[0].Hosts.Several() || a[0].Hosts.Several() {
		t.Error("a client list, even of one, makes aggregate rows; a client alone does not")
	}
}

// TestSlurmHosts: under launcher: slurm the hosts are the allocation's
// nodes, the server first; named ones must be its nodes.
func TestSlurmHosts(t *testing.T) {
	alloc := func() ([]string, error) { return []string{"n1", "n2", "n3"}, nil }
	p := mustParse(t, "name: t\nlauncher: slurm\nserver: {file: /tmp/t.dat, file_size: 64MiB}\n", Options{Allocation: alloc})
	var names []string
	for _, r := range p.Hosts.Roles() {
		names = append(names, r.Name+"="+r.Host.Address)
	}
	if strings.Join(names, " ") != "server=n1 client1=n2 client2=n3" || !p.Hosts.Several() || p.Launcher != "slurm" {
		t.Fatalf("roles %v", names)
	}
	two := mustParse(t, "name: t\nserver: {file: /tmp/t.dat, file_size: 64MiB}\n", Options{
		Set: []string{"launcher=slurm"}, Allocation: func() ([]string, error) { return []string{"a", "b"}, nil }})
	if two.Hosts.Several() || two.Hosts.Client().Address != "b" {
		t.Fatalf("two nodes: %+v", two.Hosts)
	}
	for _, c := range []struct {
		text  string
		alloc func() ([]string, error)
		want  string
	}{
		{"name: t\nlauncher: slurm\nhosts: {server: {address: n1}, client: {address: n7}}\nserver: {file: /tmp/t.dat, file_size: 64MiB}\n", alloc,
			"t.yaml:3:50: hosts.client.address: n7 is not a node of this allocation (its nodes: n1, n2, n3)"},
		{"name: t\nlauncher: slurm\nserver: {file: /tmp/t.dat, file_size: 64MiB}\n", func() ([]string, error) { return nil, errors.New("not inside a Slurm allocation") },
			"t.yaml:2:11: launcher: slurm runs the roles as steps of the Slurm allocation the runner runs in: not inside a Slurm allocation; run the runner under salloc, srun or in an sbatch script, or name the nodes with --nodes LIST to validate or plan it here"},
		{"name: t\nlauncher: slurm\nserver: {file: /tmp/t.dat, file_size: 64MiB}\n", func() ([]string, error) { return []string{"n1"}, nil },
			"t.yaml:2:11: launcher: the allocation has 1 node (n1); the server and a client need 2: allocate with salloc -N2 or more, or name the hosts"},
	} {
		_, err := Parse("t.yaml", []byte(c.text), Options{Allocation: c.alloc})
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
}

// The default node.remote_path is per user (issue 31): {uid} stands for
// the login's uid on each host. node.remote_path is not part of a point
// key, so a CSV written under the old default resumes under the new one.
func TestRemotePathPerUser(t *testing.T) {
	const text = `name: k
hosts: {server: {address: 10.0.0.1}, client: {address: 10.0.0.2}}
server: {file: /tmp/f.dat, file_size: 1MiB}
sweep: {matrix: {queue_depth: [1, 2]}}
`
	keys := func(extra string) []string {
		p, err := Parse("k.yaml", []byte(text+extra), Options{NodeBinary: "bin/node"})
		if err != nil {
			t.Fatal(err)
		}
		if extra == "" && (p.Node.RemotePath != "/var/tmp/rdmasweep-{uid}/node" || !p.Node.RemotePathPerUID() || p.Node.RemotePathFor(1001) != "/var/tmp/rdmasweep-1001/node") {
			t.Errorf("default node.remote_path %q, for uid 1001 %q", p.Node.RemotePath, p.Node.RemotePathFor(1001))
		}
		pts, err := Expand(p, ExpandOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, pt := range pts {
			ks = append(ks, pt.Key)
		}
		return ks
	}
	if a, b := keys(""), keys("node: {remote_path: /var/tmp/rdmasweep/node}\n"); !reflect.DeepEqual(a, b) {
		t.Errorf("point keys depend on node.remote_path: %v and %v", a, b)
	}
}

// A pipelined point whose plan leaves populate unwritten populates in
// parallel (fault would overlap nothing) and is keyed so; populate
// written anywhere (the file, the sweep, --set), or a point that does not
// pipeline, keeps what it says, and an older pipelined point's key
// (populate fault) keeps its meaning.
func TestPipelinedPointsPopulateInParallel(t *testing.T) {
	const rdma = "transport: rdma\nserver: {file: /tmp/t.dat, file_size: 64MiB, mr_size: 16MiB}\n"
	point := func(body string, set ...string) Point {
		t.Helper()
		pts := mustExpand(t, mustParse(t, strings.Replace(minimalYAML, "server: {file: /tmp/t.dat, file_size: 64MiB}\n", rdma, 1)+body, Options{Set: set}), ExpandOptions{})
		return pts[len(pts)-1]
	}
	for _, c := range []struct {
		name, body string
		set        []string
		want       string
	}{
		{"pipelined, populate unwritten", "sweep: {matrix: {pipeline: [true]}}\n", nil, results.PopulateParallel},
		{"not pipelined", "sweep: {matrix: {pipeline: [false]}}\n", nil, results.PopulateFault},
		{"populate fault written", "sweep: {matrix: {pipeline: [true], populate: [fault]}}\n", nil, results.PopulateFault},
		{"populate fault by --set", "sweep: {matrix: {pipeline: [true]}}\n", []string{"populate=fault"}, results.PopulateFault},
	} {
		if got := point(c.body, c.set...).Values.Str(param.Populate); got != c.want {
			t.Errorf("%s: populate %s, want %s", c.name, got, c.want)
		}
	}
	unwritten := point("sweep: {matrix: {pipeline: [true]}}\n").Key
	if parallel := point("sweep: {matrix: {pipeline: [true], populate: [parallel]}}\n").Key; unwritten != parallel {
		t.Errorf("key %s with populate unwritten, %s with parallel written; want the same", unwritten, parallel)
	}
	if fault := point("sweep: {matrix: {pipeline: [true], populate: [fault]}}\n").Key; fault == unwritten {
		t.Errorf("a pipelined point with populate fault keys as %s, as one that populates in parallel", fault)
	}
}

// An io direct point whose plan leaves window unwritten gets a ring of
// twice its client's bytes in flight, in buffers of mr_size (rdma) or
// 16 MiB (tcp), at least 4; a window written anywhere stays.
func TestDirectPointsRingForTheirClient(t *testing.T) {
	point := func(server, body string, set ...string) Point {
		t.Helper()
		pts := mustExpand(t, mustParse(t, strings.Replace(minimalYAML, "server: {file: /tmp/t.dat, file_size: 64MiB}\n", server, 1)+body, Options{Set: set}), ExpandOptions{})
		return pts[len(pts)-1]
	}
	const rdma = "transport: rdma\nserver: {file: /tmp/t.dat, file_size: 64MiB, mr_size: 1MiB, io: direct}\n"
	for _, c := range []struct {
		name, server, body string
		set                []string
		want               int64
	}{
		{"rdma, 16 × 1 MiB in flight", rdma, "client: {block_size: 1MiB, queue_depth: 16}\n", nil, 32},
		{"rdma, 16 × 64 KiB in flight", rdma, "client: {block_size: 64KiB, queue_depth: 16}\n", nil, 4},
		{"tcp, 32 × 1 MiB in flight", "transport: tcp\nserver: {file: /tmp/t.dat, file_size: 64MiB, io: direct}\n", "client: {block_size: 1MiB, queue_depth: 32}\n", nil, 4},
		{"window written", rdma, "client: {block_size: 1MiB, queue_depth: 16}\n", []string{"window=8"}, 8},
	} {
		if got := point(c.server, c.body, c.set...).Values.Int(param.Window); got != c.want {
			t.Errorf("%s: window %d, want %d", c.name, got, c.want)
		}
	}
}
