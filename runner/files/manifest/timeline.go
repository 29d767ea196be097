package manifest

import (
	"path/filepath"

	"rdmasweep/results"
)

// The timeline sidecar: RUN_ID.timeline.jsonl beside the CSV, one JSON
// line per pipelined server run, with each memory region's stages
// (results.RegionStages): population, registration, announcement. It is
// what shows, on real hardware, which stage idles ([ssd.md]); like the
// counters, a failure to write it never stops the run.

// TimelinePathFor is where run runID's timelines go, beside the CSV.
func TimelinePathFor(csvPath, runID string) string {
	return filepath.Join(filepath.Dir(csvPath), runID+".timeline.jsonl")
}

// TimelineLine is one pipelined server's regions over one run of one
// point.
type TimelineLine struct {
	PointKey    string                 `json:"point_key"`
	Repetition  int                    `json:"repetition"`
	Role        string                 `json:"role"`
	Host        string                 `json:"host"`
	DiskIdlePct *float64               `json:"disk_idle_pct,omitempty"`
	Regions     []results.RegionStages `json:"regions"`
}

// Timelines is a run's timeline sidecar; it is safe for concurrent use.
type Timelines struct{ jsonl }

// NewTimelines returns the sidecar at path, not yet created.
func NewTimelines(path string) *Timelines { return &Timelines{jsonl{path: path}} }

// Add appends one server's timeline; the first failure to write is kept
// for Close.
func (t *Timelines) Add(l TimelineLine) {
	if len(l.Regions) > 0 {
		t.add(l)
	}
}

// ReadTimelines reads a timeline sidecar; a run without one gives no
// lines and no error.
func ReadTimelines(path string) ([]TimelineLine, error) {
	return readJSONL(path, "timeline", func(l TimelineLine) bool { return len(l.Regions) > 0 })
}
