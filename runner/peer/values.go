package peer

import (
	"time"

	"rdmasweep/results"
)

// FromValues is a point's parameter values (results' names) as a peer
// sees them: the one mapping from the plan's parameters to Params, used by
// runner validate (through Check) and by the point runner (through Build).
// A parameter that does not apply to the point's transport (registration
// under tcp) is left at its neutral value, as node leaves it. ServerAddr
// and OutDir are the runner's to fill.
func FromValues(v results.Values) Params {
	tr := v.Str("transport")
	p := Params{
		Transport:    tr,
		BlockSize:    v.Int("block_size"),
		QueueDepth:   int(v.Int("queue_depth")),
		QPs:          int(v.Int("qps")),
		Pattern:      v.Str("pattern"),
		Total:        v.Int("total"),
		Duration:     time.Duration(v.Int("duration")),
		Warmup:       time.Duration(v.Int("warmup")),
		Verify:       v.Bool("verify"),
		File:         v.Str("file"),
		FileSize:     v.Int("file_size"),
		Cache:        v.Str("cache"),
		Port:         int(v.Int("port")),
		RDMAGIDIndex: -1,
	}
	if results.ParamByName("registration").AppliesTo(tr) {
		p.Registration = v.Str("registration")
	}
	if tr == "rdma" {
		p.RDMADevice = v.Str("device")
		p.RDMAIBPort = int(v.Int("ib_port"))
		p.RDMAGIDIndex = int(v.Int("gid_index"))
		p.RDMAMaxRdAtomic = max(int(v.Int("max_rd_atomic")), 0) // auto: -1
		p.RDMACQMod = int(v.Int("cq_moderation"))
	}
	return p
}
