package testhosts

import "testing"

func TestCPUMask(t *testing.T) {
	for n, want := range map[int]string{1: "1", 2: "3", 32: "ffffffff", 33: "1,ffffffff", 72: "ff,ffffffff,ffffffff"} {
		if got := cpuMask(n); got != want {
			t.Errorf("cpuMask(%d) = %q, want %q", n, got, want)
		}
	}
}
