package peer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// TestFromValuesMapping builds each peer's argv from plan values, as
// validate and the point runner do, and checks each parameter its table
// maps arrives as its option: a parameter FromValues forgot, or read under
// the wrong name, shows here. Every Option of every table has a case.
func TestFromValuesMapping(t *testing.T) {
	for _, tc := range mappingCases {
		p := FromValues(tc.v)
		p.ServerAddr = "h"
		c, err := Build(tc.peer, p)
		if err != nil {
			t.Errorf("%s, %s: %v", tc.peer, tc.id, err)
			continue
		}
		argv := " " + strings.Join(append(c.Server, c.Client...), " ") + " "
		if !strings.Contains(argv, tc.want) || tc.never != "" && strings.Contains(argv, tc.never) {
			t.Errorf("%s, %s: argv %s\nwant %q in it, and not %q", tc.peer, tc.id, argv, tc.want, tc.never)
		}
	}
}

// TestMappingsHaveCases holds the cases to the tables: each parameter a
// peer's table maps to an option has a case.
func TestMappingsHaveCases(t *testing.T) {
	for _, name := range Names() {
		tool, _ := Lookup(name)
		for _, m := range tool.Map {
			if m.Option != "" && !slices.ContainsFunc(mappingCases, func(c mappingCase) bool { return c.peer == name && c.id == m.Param }) {
				t.Errorf("%s maps %s to %s, and mappingCases has no case of it", name, m.Param, m.Option)
			}
		}
	}
}

var (
	rdmaValues = plan.Defaults().With(param.Transport, "rdma").With(param.Duration, 10*time.Second)
	tcpValues  = plan.Defaults().With(param.Duration, 10*time.Second)
	fileValues = plan.Defaults().With(param.File, "/data/f").With(param.FileSize, 1<<30)
)

type mappingCase struct {
	peer  string
	v     plan.Values
	id    param.ID // the parameter the case is about
	want  string   // in the server's argv then the client's, joined by spaces
	never string   // not in it
}

var mappingCases = func() []mappingCase {
	rdma, tcp, file := rdmaValues, tcpValues, fileValues
	return []mappingCase{
		{NVMeOF, file, param.File, " nvmet --transport tcp ", ""},
		{NVMeOF, file, param.File, " --file /data/f ", ""},
		{NVMeOF, file, param.FileSize, " --file-size 1073741824 --create ", ""},
		{NVMeOF, file.With(param.BlockSize, 4096), param.BlockSize, " --block-size 4096 ", ""},
		{NVMeOF, file.With(param.QueueDepth, 8), param.QueueDepth, " --queue-depth 8 ", ""},
		{NVMeOF, file.With(param.QPs, 4), param.QPs, " --queue-depth 16 --qps 4 ", ""},
		{NVMeOF, file, param.QPs, " --queue-depth 16 ", " --qps "},
		{NVMeOF, file.With(param.Pattern, "random"), param.Pattern, " --pattern random ", ""},
		{NVMeOF, file.With(param.Duration, 3*time.Second), param.Duration, " --duration 3s ", " --total "},
		{NVMeOF, file.With(param.Total, 1<<20), param.Total, " --total 1048576 ", " --duration "},
		{NVMeOF, file.With(param.Warmup, time.Second), param.Warmup, " --warmup 1s ", ""},
		{NVMeOF, file.With(param.Cache, "warm"), param.Cache, " --cache warm ", ""},
		{NVMeOF, file, param.Port, " --svcid 4420 ", ""},
		{NVMeOF, file.With(param.Port, 4421), param.Port, " --svcid 4421 ", ""},
		{NVMeOF, rdmaValues.With(param.File, "/f").With(param.FileSize, 1<<20), param.Transport, " nvmet --transport rdma ", ""},
		{IBReadBW, rdma, param.MaxRdAtomic, "", " -o "}, // auto: the device's maximum
		{IBReadBW, rdma.With(param.MaxRdAtomic, 4), param.MaxRdAtomic, " -o 4 ", ""},
		{IBReadBW, rdma.With(param.CQModeration, 8), param.CQModeration, " -Q 8 ", ""},
		{IBReadBW, rdma.With(param.CQModeration, 1), param.CQModeration, " -Q 1 ", ""},
		{IBReadBW, rdma, param.CQModeration, " -t 16 -Q 4 ", ""},                         // auto: node's rule, max(1, the depth per QP / 4), given explicitly
		{IBReadBW, rdma.With(param.CQModeration, 64), param.CQModeration, " -Q 16 ", ""}, // capped at the depth per QP, as node's
		// -t is the depth per QP, as perftest's tx depth is: qps 2 at
		// queue_depth 16 is 8 a QP, as node posts.
		{IBReadBW, rdma.With(param.QPs, 2), param.QueueDepth, " -q 2 -t 8 ", ""},
		{IBReadBW, rdma.With(param.BlockSize, 65536), param.BlockSize, " -s 65536 ", ""},
		{IBReadBW, rdma.With(param.QPs, 3), param.QPs, " -q 3 ", ""},
		{IBReadBW, rdma.With(param.QueueDepth, 8), param.QueueDepth, " -t 8 ", ""},
		{IBReadBW, rdma.With(param.Device, "mlx5_1"), param.Device, " -d mlx5_1 ", ""},
		{IBReadBW, rdma.With(param.IBPort, 2), param.IBPort, " -i 2 ", ""},
		{IBReadBW, rdma, param.IBPort, "", " -i "}, // auto
		{IBReadBW, rdma.With(param.GIDIndex, 3), param.GIDIndex, " -x 3 ", ""},
		{IBReadBW, rdma, param.GIDIndex, "", " -x "}, // auto
		{IBReadBW, rdma.With(param.TrafficClass, 106), param.TrafficClass, " --tclass 106 ", ""},
		{IBReadBW, rdma, param.TrafficClass, "", " --tclass "}, // auto
		// Over rdma_cm, -R, and the traffic class is the cm_id's TOS (-T):
		// perftest takes --tclass only over its own exchange.
		{IBReadBW, rdma.With(param.Connect, "cm"), param.Connect, " -R ", ""},
		{IBReadBW, rdma, param.Connect, "", " -R "},
		{IBReadBW, rdma.With(param.Connect, "cm").With(param.TrafficClass, 106), param.TrafficClass, " -R -T 106 ", "--tclass"},
		{IBReadBW, rdma.With(param.Port, 19000), param.Port, " -p 19000 ", ""},
		{IBReadBW, rdma.With(param.Warmup, 2*time.Second), param.Duration, " -D 14 ", ""},
		{IBReadBW, rdma.With(param.Warmup, 2*time.Second), param.Warmup, " --margin 2 ", ""},
		{IBReadBW, rdma.With(param.Duration, time.Duration(0)).With(param.Total, 1<<30).With(param.QPs, 2), param.Total, " -n 512 ", ""},
		{Iperf3, tcp.With(param.BlockSize, 4096), param.BlockSize, " -l 4096 ", ""},
		{Iperf3, tcp.With(param.QPs, 4), param.QPs, " -P 4 ", ""},
		{Iperf3, tcp, param.Duration, " -t 10 ", ""},
		{Iperf3, tcp.With(param.Warmup, time.Second), param.Warmup, " -O 1 ", ""},
		{Iperf3, tcp.With(param.Duration, time.Duration(0)).With(param.Total, 1<<30), param.Total, " -n 1073741824 ", ""},
		{Iperf3, tcp.With(param.Port, 7000), param.Port, " -p 7000 ", ""},
		{Fio, file, param.File, " --filename=/data/f ", ""},
		{Fio, file, param.FileSize, " --size=1073741824 ", ""},
		{Fio, file.With(param.BlockSize, 4096), param.BlockSize, " --bs=4096 ", ""},
		{Fio, file.With(param.QueueDepth, 32), param.QueueDepth, " --iodepth=32 ", ""},
		{Fio, file.With(param.Pattern, "random"), param.Pattern, " --rw=randread ", ""},
		{Fio, file.With(param.Duration, 2500*time.Millisecond), param.Duration, " --runtime=2500ms --time_based ", ""},
		{Fio, file.With(param.Total, 1<<28), param.Total, " --io_size=268435456 ", ""},
		{Fio, file.With(param.Warmup, time.Second), param.Warmup, " --ramp_time=1000ms ", ""},
		{Fio, file.With(param.Cache, "warm"), param.Cache, " --invalidate=0 ", ""},
		{Fio, file, param.Cache, "", "--invalidate"}, // cold: fio's own default
		// fio_matched: populate's 8 readers as 8 jobs, each over its own
		// eighth of the file, the total shared alike.
		{FioMatched, file, param.File, " --filename=/data/f ", ""},
		{FioMatched, file, param.FileSize, " --size=134217728 --numjobs=8 --offset_increment=134217728 --group_reporting ", " --size=1073741824 "},
		{FioMatched, file.With(param.BlockSize, 4096), param.BlockSize, " --bs=4096 ", ""},
		{FioMatched, file.With(param.QueueDepth, 32), param.QueueDepth, " --iodepth=32 ", ""},
		{FioMatched, file.With(param.Pattern, "random"), param.Pattern, " --rw=randread ", ""},
		{FioMatched, file.With(param.Duration, 2500*time.Millisecond), param.Duration, " --runtime=2500ms --time_based ", " --io_size"},
		{FioMatched, file.With(param.Total, 1<<28), param.Total, " --io_size=33554432 ", ""},
		{FioMatched, file.With(param.Warmup, time.Second), param.Warmup, " --ramp_time=1000ms ", ""},
		{FioMatched, file.With(param.Cache, "warm"), param.Cache, " --invalidate=0 ", ""},
	}
}()

// TestBenchRDMADepthPerQP: bench-rdma at qps 2 gives ib_read_bw the depth
// node posts on each QP, not the total, so both keep as many READs in
// flight; and the same moderation node uses.
func TestBenchRDMADepthPerQP(t *testing.T) {
	p, err := plan.Load("../../../plans/bench-rdma.yaml", plan.Options{Set: []string{"qps=2", "workload=ib_read_bw"}})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil || len(pts) == 0 {
		t.Fatalf("expand: %v (%d points)", err, len(pts))
	}
	for _, pt := range pts {
		v := FromValues(pt.Values)
		v.ServerAddr = "h"
		c, err := Build(IBReadBW, v)
		if err != nil {
			t.Fatal(err)
		}
		per := results.DepthPerQP(v.QueueDepth, v.QPs)
		mod := results.CQModeration(v.RDMACQMod, v.QueueDepth, v.QPs, false)
		argv := " " + strings.Join(append(c.Server, c.Client...), " ") + " "
		if want := fmt.Sprintf(" -q 2 -t %d ", per); !strings.Contains(argv, want) || per != 8 {
			t.Errorf("point %s: argv %s, want %q (queue_depth %d over 2 QPs)", pt.Key, argv, want, v.QueueDepth)
		}
		if want := fmt.Sprintf(" -Q %d ", mod); !strings.Contains(argv, want) {
			t.Errorf("point %s: argv %s, want node's moderation %q", pt.Key, argv, want)
		}
	}
}

// TestIBReadBWRunsWhereNodeRuns: where the plan leaves device, ib_port
// and gid_index to auto, each side of ib_read_bw gets node's own choice
// on its host (node devices --route-to), so perftest does not fall back
// to GID 0, often RoCE v1 or link-local; a value the plan names wins, and
// without a choice the option stays perftest's.
func TestIBReadBWRunsWhereNodeRuns(t *testing.T) {
	chosen := &results.DeviceChoice{Device: "rxe0", IBPort: 1, GIDIndex: 3, GID: "::ffff:10.9.0.2", GIDType: "RoCE v2"}
	cases := []struct {
		v      plan.Values
		chosen *results.DeviceChoice
		want   []string // each in the argv
		never  []string
	}{
		{rdmaValues, chosen, []string{" -d rxe0 ", " -i 1 ", " -x 3 "}, nil},
		{rdmaValues.With(param.GIDIndex, 1), chosen, []string{" -x 1 "}, []string{" -x 3 "}},
		{rdmaValues.With(param.Device, "mlx5_1").With(param.IBPort, 2), chosen, []string{" -d mlx5_1 ", " -i 2 ", " -x 3 "}, []string{"rxe0", " -i 1 "}},
		{rdmaValues, nil, nil, []string{" -d ", " -i ", " -x "}},
		// rdma_cm resolves them from the address, for node and perftest.
		{rdmaValues.With(param.Connect, "cm"), chosen, []string{" -R "}, []string{" -d ", " -i ", " -x "}},
	}
	for i, tc := range cases {
		p := FromValues(tc.v)
		p.ServerAddr, p.Chosen = "h", tc.chosen
		c, err := Build(IBReadBW, p)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		for _, side := range [][]string{c.Server, c.Client} {
			argv := " " + strings.Join(side, " ") + " "
			for _, w := range tc.want {
				if !strings.Contains(argv, w) {
					t.Errorf("case %d: argv %s lacks %q", i, argv, w)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(argv, n) {
					t.Errorf("case %d: argv %s has %q", i, argv, n)
				}
			}
		}
	}
}
