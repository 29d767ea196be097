package results

import (
	"encoding/json"
	"strings"
	"testing"
)

// A region's stages travel as a five-number array, to 0.01 ms, and read
// back the same; the longest timeline node sends (MaxRegions regions,
// hours long) fits in one event line.
func TestRegionStagesJSON(t *testing.T) {
	p := func(v float64) *float64 { return &v }
	in := []RegionStages{
		{PopulateStartMs: p(0), PopulateEndMs: p(12.3456), RegisterStartMs: 12.5, RegisterEndMs: 13.004, AnnouncedMs: 13.1},
		{RegisterStartMs: 1, RegisterEndMs: 2, AnnouncedMs: 3},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[[0,12.35,12.5,13,13.1],[null,null,1,2,3]]`; string(b) != want {
		t.Fatalf("marshalled %s, want %s", b, want)
	}
	var out []RegionStages
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if *out[0].PopulateEndMs != 12.35 || out[1].PopulateStartMs != nil || out[1].AnnouncedMs != 3 {
		t.Fatalf("read back %+v", out)
	}
	if err := json.Unmarshal([]byte(`[[1,2,3]]`), &out); err == nil || !strings.Contains(err.Error(), "want [populate_start") {
		t.Fatalf("a short array: %v; want an error naming the five", err)
	}
	long := make([]RegionStages, MaxRegions)
	for i := range long {
		v := 3_600_000.12 + float64(i)
		long[i] = RegionStages{PopulateStartMs: &v, PopulateEndMs: &v, RegisterStartMs: v, RegisterEndMs: v, AnnouncedMs: v}
	}
	b, _ = json.Marshal(Done{Type: TypeDone, Pipeline: &Pipeline{Regions: MaxRegions, Timeline: long}})
	if len(b) >= MaxEventLine {
		t.Fatalf("a done event with %d regions is %d bytes, over the %d an event line may be", MaxRegions, len(b), MaxEventLine)
	}
}
