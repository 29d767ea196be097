package results

import "testing"

// node run's line reads back as written; a line that is not its, or one
// that holds no measurement, gives no figure.
func TestRunCPULine(t *testing.T) {
	c := RunCPU{CPUUserS: 1.25, CPUSysS: 0.5, CPUWallS: 3.5}
	got, ok, err := ParseRunCPU(c.Line())
	if !ok || err != nil || got != c || *got.PerSecond() != 0.5 {
		t.Errorf("ParseRunCPU(%q) = %+v, %v, %v", c.Line(), got, ok, err)
	}
	for _, tc := range []struct {
		line string
		ours bool
	}{
		{"iperf3: error - unable to connect\n", false},
		{"node: error: run: deadline of 1s reached: stopped iperf3\n", false},
		{RunCPUPrefix + "{\"cpu_user_s\":1,\"cpu_sys_s\":0,\"cpu_wall_s\":0}\n", true},
		{RunCPUPrefix + "{\"cpu_user_s\":-1,\"cpu_sys_s\":0,\"cpu_wall_s\":1}\n", true},
		{RunCPUPrefix + "{\"cpu_user_s\":1,", true},
	} {
		_, ok, err := ParseRunCPU([]byte(tc.line))
		if ok != tc.ours || (ok && err == nil) || (!ok && err != nil) {
			t.Errorf("ParseRunCPU(%q): ours %v, err %v; want ours %v and, if ours, an error", tc.line, ok, err, tc.ours)
		}
	}
}
