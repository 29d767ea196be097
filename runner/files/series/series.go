// Package series writes a run's time series beside its CSV:
// RUN_ID.series.jsonl, one JSON line per interval a client reported, with
// the point, repetition and role it belongs to, so a notebook can draw
// bandwidth over time. The file is created on the first line; a failure
// to write it never stops the run, it is reported by Close.
package series

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/hosts/role"
)

// PathFor is where run runID's time series goes: RUN_ID.series.jsonl
// beside the CSV, next to its manifest.
func PathFor(csvPath, runID string) string {
	return filepath.Join(filepath.Dir(csvPath), runID+".series.jsonl")
}

// File is a run's time series; it is safe for concurrent use.
type File struct {
	path string
	mu   sync.Mutex
	f    *os.File
	err  error
}

// Line is one line of the file.
type Line struct {
	PointKey   string `json:"point_key"`
	Repetition int    `json:"repetition"`
	Role       string `json:"role"`
	Host       string `json:"host"`
	*results.Interval
}

// New returns the series of path, not yet created.
func New(path string) *File { return &File{path: path} }

// Add appends one interval; the first failure to write is kept for Close.
func (s *File) Add(pt plan.Point, rep int, t role.Target, iv *results.Interval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	if s.f == nil {
		if s.f, s.err = outdir.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); s.err != nil {
			return
		}
	}
	b, _ := json.Marshal(Line{PointKey: pt.Key, Repetition: rep, Role: t.Role, Host: t.Host.Name(), Interval: iv})
	_, s.err = s.f.Write(append(b, '\n'))
}

// Close closes the file and says what went wrong, if anything; it may be
// called again.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		if err := s.f.Close(); s.err == nil {
			s.err = err
		}
		s.f = nil
	}
	if s.err != nil {
		return fmt.Errorf("write %s: %w", s.path, s.err)
	}
	return nil
}
