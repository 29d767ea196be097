package results

import (
	"strings"
	"testing"
)

// TestCheckPeerArgs: the runner's own fio runs pass; an option that runs
// a program, a job file, a write or a run without --readonly does not.
func TestCheckPeerArgs(t *testing.T) {
	runner := "fio --name=rdmasweep --filename=/data/f --readonly --ioengine=io_uring --rw=randread --bs=4096 --iodepth=32 --size=1073741824 --io_size=268435456 --lat_percentiles=1 --output-format=json"
	for _, c := range []struct {
		argv string
		ok   bool
	}{
		{runner, true},
		{"fio --version", true},
		{"iperf3 -c 10.0.0.1 -J", true},
		{"ib_read_bw -s 4096 --out_json h", true},
		{runner + " --exec_prerun=/tmp/x.sh", false},
		{runner + " --exec_postrun=sh", false},
		{runner + " --trigger=sh", false},
		{runner + " --server", false},
		{runner + " jobfile.fio", false},
		{strings.Replace(runner, "--ioengine=io_uring", "--ioengine=exec", 1), false},
		{strings.Replace(runner, "--rw=randread", "--rw=write", 1), false},
		{strings.Replace(runner, "--readonly ", "", 1), false},
	} {
		err := CheckPeerArgs(strings.Fields(c.argv))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.argv, err, c.ok)
		}
	}
}
