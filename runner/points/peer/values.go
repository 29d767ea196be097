package peer

import (
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// FromValues is a point's parameter values as a peer sees them: the one
// mapping from the plan's parameters to Params, used by runner validate
// (through Check) and by the point runner (through Build). A parameter
// that does not apply to the point's transport (registration under tcp)
// is left at its neutral value, as node leaves it. ServerAddr and OutDir
// are the runner's to fill.
func FromValues(v results.Values) Params {
	tr := v.Str(param.Transport)
	p := Params{
		Transport:    tr,
		BlockSize:    v.Int(param.BlockSize),
		QueueDepth:   int(v.Int(param.QueueDepth)),
		QPs:          int(v.Int(param.QPs)),
		Pattern:      v.Str(param.Pattern),
		Total:        v.Int(param.Total),
		Duration:     time.Duration(v.Int(param.Duration)),
		Warmup:       time.Duration(v.Int(param.Warmup)),
		Verify:       v.Bool(param.Verify),
		File:         v.Str(param.File),
		FileSize:     v.Int(param.FileSize),
		Cache:        v.Str(param.Cache),
		Port:         int(v.Int(param.Port)),
		RDMAGIDIndex: -1,
	}
	if results.ParamOf(param.Registration).AppliesTo(tr) {
		p.Registration = v.Str(param.Registration)
	}
	if results.ParamOf(param.Device).AppliesTo(tr) {
		p.RDMADevice = v.Str(param.Device)
		p.RDMAIBPort = max(int(v.Int(param.IBPort)), 0)           // auto: -1
		p.RDMAGIDIndex = int(v.Int(param.GIDIndex))               // auto: -1
		p.RDMAMaxRdAtomic = max(int(v.Int(param.MaxRdAtomic)), 0) // auto: -1
		p.RDMACQMod = int(v.Int(param.CQModeration))
		p.RDMAConnect = v.Str(param.Connect)
		if tc := int(v.Int(param.TrafficClass)); tc >= 0 { // auto: -1
			p.RDMATClass = &tc
		}
	}
	return p
}
