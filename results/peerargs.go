package results

import (
	"fmt"
	"slices"
	"strings"
)

// FioOptions are the fio options an attached `node run` passes on: the
// ones runner/points/peer builds its fio runs from, each as --NAME or
// --NAME=VALUE. fio has options that start programs (--exec_prerun,
// --exec_postrun, --trigger, ioengine=exec), serve jobs to the network
// (--server) or read job files that may hold any of these: none is the
// runner's, so none reaches fio.
var FioOptions = []string{
	"name", "filename", "readonly", "direct", "ioengine", "rw", "bs",
	"iodepth", "size", "numjobs", "offset_increment", "group_reporting",
	"runtime", "time_based", "io_size", "ramp_time", "invalidate",
	"lat_percentiles", "output-format", "version",
}

// fioReads are the --rw values of a read: the runner's fio only reads.
var fioReads = []string{"read", "randread"}

// CheckPeerArgs refuses a peer's argv (argv[0] one of PeerPrograms) that
// carries what the runner never passes: for fio, an option outside
// FioOptions, a job file, an ioengine that runs a program, a --rw that
// writes, or no --readonly (a run other than --version). ib_read_bw and
// iperf3 have no option that starts a program.
func CheckPeerArgs(argv []string) error {
	if len(argv) == 0 || argv[0] != "fio" {
		return nil
	}
	readonly := false
	for _, a := range argv[1:] {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case !strings.HasPrefix(a, "--") || !slices.Contains(FioOptions, name):
			return fmt.Errorf("fio %q is not an option the runner passes", a)
		case name == "ioengine" && value == "exec":
			return fmt.Errorf("fio %q runs a program", a)
		case name == "rw" && !slices.Contains(fioReads, value):
			return fmt.Errorf("fio %q is not a read", a)
		case name == "readonly" || name == "version":
			readonly = true
		}
	}
	if !readonly {
		return fmt.Errorf("fio without --readonly")
	}
	return nil
}
