package results

import "fmt"

// The rule that proves a cold row cold: the disk read nearly all the
// bytes the point had to bring in, and the file was nearly all out of the
// page cache at its start. A hypervisor's cache, dm-cache or another
// process keeping the file mapped would otherwise make a "cold" row warm
// with no sign.
const (
	ColdReadMin   = 0.95 // cold_read_fraction at least this
	ColdCachedMax = 0.02 // cached_fraction at most this
)

// SetColdReadFraction sets cold_read_fraction on an ok cold row of node
// that has disk_read_bytes: those bytes ÷ the bytes the point had to
// bring in, file_size or the bytes read when fewer. Elsewhere it is nil.
func (r *Row) SetColdReadFraction() {
	r.ColdReadFraction = nil
	if r.Status != StatusOK || r.Param("cache") != "cold" || r.Workload() != "node" || r.DiskReadBytes == nil || r.Bytes == nil {
		return
	}
	need := r.ParamInt("file_size")
	if *r.Bytes < need || need <= 0 {
		need = *r.Bytes
	}
	if need <= 0 {
		return
	}
	r.ColdReadFraction = ref(float64(*r.DiskReadBytes) / float64(need))
}

// SetDiskCeiling sets disk_ceiling_mb_s on an ok cold row from the
// ceilings measured in its run, by the server host the CSV names (the
// manifest's disk_ceilings); a host without one leaves it empty.
func (r *Row) SetDiskCeiling(byHost map[string]float64) {
	r.DiskCeilingMBs = nil
	if mbs, ok := byHost[r.ServerHost]; ok && r.Status == StatusOK && r.Param("cache") == "cold" && mbs > 0 {
		r.DiskCeilingMBs = ref(mbs)
	}
}

// NotCold says why an ok cold row of node is not proven cold, or "" when
// it is or the rule does not apply: cold_read_fraction below ColdReadMin,
// or cached_fraction above ColdCachedMax. A row with neither figure
// (tmpfs has no disk) is not proven either.
func (r Row) NotCold() string {
	if r.Status != StatusOK || r.Param("cache") != "cold" || r.Workload() != "node" {
		return ""
	}
	var why []string
	if r.CachedFraction != nil && *r.CachedFraction > ColdCachedMax {
		why = append(why, fmt.Sprintf("%.1f %% of the file was cached at its start (at most %g %%)", 100**r.CachedFraction, 100*ColdCachedMax))
	}
	switch {
	case r.ColdReadFraction == nil:
		why = append(why, "no disk read was counted (no block device under the file?)")
	case *r.ColdReadFraction < ColdReadMin:
		why = append(why, fmt.Sprintf("the disk read %.2f of the bytes the point brought in (at least %g)", *r.ColdReadFraction, ColdReadMin))
	}
	if len(why) == 0 {
		return ""
	}
	s := "not proven cold: " + why[0]
	for _, w := range why[1:] {
		s += "; " + w
	}
	return s
}
