package results

import "testing"

// node run's line reads back as written, also after a command's last
// words that lacked a newline; a line that is not its, or one that holds
// no measurement, gives no figure.
func TestRunCPULine(t *testing.T) {
	c := RunCPU{CPUUserS: 1.25, CPUSysS: 0.5, CPUWallS: 3.5}
	for _, ahead := range []string{"", "iperf3: done"} {
		before, got, ok, err := CutRunCPU(append([]byte(ahead), c.Line()...))
		if !ok || err != nil || got != c || string(before) != ahead || *got.PerSecond() != 0.5 {
			t.Errorf("CutRunCPU(%q + line) = %q, %+v, %v, %v", ahead, before, got, ok, err)
		}
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
		_, _, ok, err := CutRunCPU([]byte(tc.line))
		if ok != tc.ours || (ok && err == nil) || (!ok && err != nil) {
			t.Errorf("CutRunCPU(%q): ours %v, err %v; want ours %v and, if ours, an error", tc.line, ok, err, tc.ours)
		}
	}
}
