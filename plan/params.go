package plan

import (
	"slices"
	"strconv"
	"time"

	"rdmasweep/results"
)

// kind is how a parameter's value is written and compared.
type kind int

const (
	kindSize     kind = iota // bytes, written "4KiB" or 4096
	kindInt                  // a plain integer
	kindEnum                 // one of param.enum
	kindBool                 // true | false
	kindDuration             // a Go duration, "5s"
	kindAbsPath              // an absolute path on the host that uses it
)

// value holds one parameter value; which field is meaningful depends on
// the parameter's kind (n for sizes, ints and durations).
type value struct {
	n int64
	s string
	b bool
}

// param describes one field of server: or client:. Its name is unique
// across both sections and is the name used by sweep, --set, --only and
// the CSV column stem.
type param struct {
	name      string
	section   string // "server" | "client"
	kind      kind
	enum      []string
	min       int64 // least value for sizes, ints and durations
	max       int64 // greatest value for ints; 0 = none
	sweepable bool  // has a CSV column
	get       func(*ServerParams, *ClientParams) value
	set       func(*ServerParams, *ClientParams, value)
}

// params lists server: then client: fields, in the order the plan schema
// documents them. A param is sweepable exactly when it is in sweepable
// (TestSweepableParams holds the two together).
var params = []*param{
	{name: "file", section: "server", kind: kindAbsPath,
		get: func(s *ServerParams, _ *ClientParams) value { return value{s: s.File} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.File = v.s }},
	{name: "file_size", section: "server", kind: kindSize, min: 1, sweepable: true,
		get: func(s *ServerParams, _ *ClientParams) value { return value{n: s.FileSize} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.FileSize = v.n }},
	{name: "create", section: "server", kind: kindBool,
		get: func(s *ServerParams, _ *ClientParams) value { return value{b: s.Create} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.Create = v.b }},
	{name: "cache", section: "server", kind: kindEnum, enum: []string{"cold", "warm"}, sweepable: true,
		get: func(s *ServerParams, _ *ClientParams) value { return value{s: s.Cache} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.Cache = v.s }},
	{name: "registration", section: "server", kind: kindEnum, enum: []string{"pinned", "odp"}, sweepable: true,
		get: func(s *ServerParams, _ *ClientParams) value { return value{s: s.Registration} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.Registration = v.s }},
	{name: "port", section: "server", kind: kindInt, min: 0, max: 65535,
		get: func(s *ServerParams, _ *ClientParams) value { return value{n: int64(s.Port)} },
		set: func(s *ServerParams, _ *ClientParams, v value) { s.Port = int(v.n) }},

	{name: "block_size", section: "client", kind: kindSize, min: 1, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: c.BlockSize} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.BlockSize = v.n }},
	{name: "queue_depth", section: "client", kind: kindInt, min: 1, max: 1 << 20, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: int64(c.QueueDepth)} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.QueueDepth = int(v.n) }},
	{name: "qps", section: "client", kind: kindInt, min: 1, max: 1 << 16, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: int64(c.QPs)} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.QPs = int(v.n) }},
	{name: "pattern", section: "client", kind: kindEnum, enum: []string{"sequential", "random"}, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{s: c.Pattern} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.Pattern = v.s }},
	{name: "total", section: "client", kind: kindSize, min: 0, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: c.Total} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.Total = v.n }},
	{name: "duration", section: "client", kind: kindDuration, min: 0, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: int64(c.Duration)} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.Duration = time.Duration(v.n) }},
	{name: "warmup", section: "client", kind: kindDuration, min: 0, sweepable: true,
		get: func(_ *ServerParams, c *ClientParams) value { return value{n: int64(c.Warmup)} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.Warmup = time.Duration(v.n) }},
	{name: "verify", section: "client", kind: kindBool,
		get: func(_ *ServerParams, c *ClientParams) value { return value{b: c.Verify} },
		set: func(_ *ServerParams, c *ClientParams, v value) { c.Verify = v.b }},
}

// paramByName finds a server: or client: field by its name.
func paramByName(name string) *param {
	for _, p := range params {
		if p.name == name {
			return p
		}
	}
	return nil
}

// sectionParams returns the fields of one section, in table order.
func sectionParams(section string) []string {
	var names []string
	for _, p := range params {
		if p.section == section {
			names = append(names, p.name)
		}
	}
	return names
}

// sweepable is SweepableParams' list: the parameters with a CSV column, in
// the CSV's column order.
var sweepable = []string{"file_size", "block_size", "queue_depth", "qps", "pattern", "cache", "registration", "total", "duration", "warmup"}

// SweepableParams lists the parameter names that have a CSV column, in CSV
// order (file_size_bytes, block_size_bytes, queue_depth, ...). Only these
// may appear in sweep.zip and sweep.matrix.
func SweepableParams() []string { return slices.Clone(sweepable) }

// format renders v for people: sizes in exact binary units, durations as
// Go strings.
func (p *param) format(v value) string {
	switch p.kind {
	case kindSize:
		return results.FormatSize(v.n)
	case kindInt:
		return strconv.FormatInt(v.n, 10)
	case kindBool:
		return strconv.FormatBool(v.b)
	case kindDuration:
		return time.Duration(v.n).String()
	default:
		return v.s
	}
}

// canonical is v as it appears in a point key's JSON: sizes as integer
// bytes, durations as Go duration strings.
func (p *param) canonical(v value) any {
	switch p.kind {
	case kindSize, kindInt:
		return v.n
	case kindBool:
		return v.b
	case kindDuration:
		return time.Duration(v.n).String()
	default:
		return v.s
	}
}
