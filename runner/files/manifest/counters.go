package manifest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
)

// The counters sidecar: RUN_ID.counters.jsonl beside the CSV, one JSON
// line per role of each run, with every raw delta its node read under the
// kernel's own name (results.Counters.Raw), the devices they were read
// from (the block device under the file, and whether it is a partition,
// dm or md device; the RDMA port and its family; the netdev) and why a
// group could not be read. The CSV carries only the headlines; this file
// is what `runner summary --counters` prints. Like the time series, it
// is created on the first line, and a failure to write it never stops
// the run: Close reports it.

// CountersPathFor is where run runID's counters go, beside the CSV.
func CountersPathFor(csvPath, runID string) string {
	return filepath.Join(filepath.Dir(csvPath), runID+".counters.jsonl")
}

// CounterLine is one line of the sidecar: one role's counters over one
// run of one point.
type CounterLine struct {
	PointKey   string `json:"point_key"`
	Repetition int    `json:"repetition"`
	Role       string `json:"role"` // the plan's role name, e.g. server, client
	Host       string `json:"host"`
	*results.Counters
}

// Counters is a run's counters sidecar; it is safe for concurrent use.
type Counters struct{ jsonl }

// NewCounters returns the sidecar at path, not yet created.
func NewCounters(path string) *Counters { return &Counters{jsonl{path: path}} }

// Add appends one role's counters; the first failure to write is kept
// for Close.
func (c *Counters) Add(l CounterLine) {
	if l.Counters != nil {
		c.add(l)
	}
}

// jsonl is a sidecar of JSON lines, created on its first line; it is
// safe for concurrent use.
type jsonl struct {
	path string
	mu   sync.Mutex
	f    *os.File
	err  error
}

// add appends v's line; the first failure to write is kept for Close.
func (c *jsonl) add(v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if c.f == nil {
		if c.f, c.err = outdir.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); c.err != nil {
			return
		}
	}
	b, _ := json.Marshal(v)
	_, c.err = c.f.Write(append(b, '\n'))
}

// Close closes the file and says what went wrong, if anything; it may be
// called again.
func (c *jsonl) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		if err := c.f.Close(); c.err == nil {
			c.err = err
		}
		c.f = nil
	}
	if c.err != nil {
		return fmt.Errorf("write %s: %w", c.path, c.err)
	}
	return nil
}

// ReadCounters reads a counters sidecar. A run with no sidecar (an exec
// before counters, or one whose nodes reported none) gives no lines and
// no error; a line that is not a counter line is an error naming it.
func ReadCounters(path string) ([]CounterLine, error) {
	return readJSONL(path, "counters", func(l CounterLine) bool { return l.Counters != nil })
}

// readJSONL reads the sidecar of JSON lines at path, what it holds
// naming it in errors: no file gives no lines and no error; a line that
// does not decode, or that ok refuses, is an error naming it.
func readJSONL[T any](path, what string, ok func(T) bool) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, results.MaxEventLine)
	for n := 1; sc.Scan(); n++ {
		var l T
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || !ok(l) {
			return nil, fmt.Errorf("%s:%d: not a %s line: %v", path, n, what, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
