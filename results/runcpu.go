package results

// node run's report of the command it ran. Its stdout is the command's
// own (a peer's data), so the report is the one line node run adds to
// stderr once the command has exited: RunCPUPrefix, then RunCPU as JSON.
// A person reading the log sees it there; the runner takes it out of the
// tool's stderr before it quotes the tool's last words.

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// RunCPU is the CPU the command node run ran used: wait4's rusage of it
// and of every descendant it waited for, user and system, over CPUWallS
// seconds of wall time from its start to its exit. (cpu_user_s +
// cpu_sys_s) / cpu_wall_s is CPU seconds per second, as in Result.
type RunCPU struct {
	CPUUserS float64 `json:"cpu_user_s"`
	CPUSysS  float64 `json:"cpu_sys_s"`
	CPUWallS float64 `json:"cpu_wall_s"`
}

// RunCPUPrefix starts node run's line on stderr.
const RunCPUPrefix = "node: run: cpu "

// Line is c's line on stderr, newline included.
func (c RunCPU) Line() []byte {
	b, _ := json.Marshal(c)
	return append(append([]byte(RunCPUPrefix), b...), '\n')
}

// CutRunCPU finds node run's cpu line at the end of line, one line of
// stderr with or without its newline: ok is false when it is not there.
// before is what precedes it on the line, where the command's last words
// lacked a newline; err says what is wrong with a cpu line that does not
// parse.
func CutRunCPU(line []byte) (before []byte, c RunCPU, ok bool, err error) {
	i := bytes.LastIndex(line, []byte(RunCPUPrefix))
	if i < 0 {
		return line, RunCPU{}, false, nil
	}
	rest := bytes.TrimRight(line[i+len(RunCPUPrefix):], "\r\n")
	if err := json.Unmarshal(rest, &c); err != nil {
		return line[:i], RunCPU{}, true, fmt.Errorf("node run's cpu line: %w", err)
	}
	if c.CPUUserS < 0 || c.CPUSysS < 0 || !(c.CPUWallS > 0) {
		return line[:i], RunCPU{}, true, fmt.Errorf("node run's cpu line holds no measurement: %s", rest)
	}
	return line[:i], c, true, nil
}

// PerSecond is (user + sys) / wall, the row's CPU cell.
func (c RunCPU) PerSecond() *float64 { return cpuPerSecond(c.CPUUserS, c.CPUSysS, c.CPUWallS) }
