package results

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"rdmasweep/results/param"
)

// A Param is one parameter of an experiment: a field of a plan, a flag of
// node serve or node read, and, when it has one, a CSV column. Each is
// declared once, in the table in schema.go; the plan loader, --set, --only
// and sweeps, the point key, node's argv, the CSV, the summary, the plot and
// the generated docs all read it from there.
type Param struct {
	// Name is how plans, --set, --only and sweeps write it; unique across
	// sections. Code names it by its constant in package param (ID).
	Name string
	// Section is where a plan writes it: "" (top level), "server",
	// "client" or "rdma".
	Section string
	Kind    Kind
	Enum    []string // the allowed values of a KindEnum
	// Default is the value when a plan does not write one, in plan syntax
	// ("1MiB", "16", "0s"); "" for a KindString means unset, and Auto
	// params default to auto.
	Default string
	// Required params have no default; a plan must write them or sweep them.
	Required bool
	// Auto params may be left unset, or written as their AutoWord ("auto"
	// when empty): node, or the runner, then chooses.
	Auto     bool
	AutoWord string
	// AutoKey is what an auto value of a KindInt enters point keys as,
	// when the param became auto after version 1: the default it had
	// before (ib_port: 1), so the keys of older rows stay. Without it,
	// auto enters keys as null.
	AutoKey int64
	// Min and Max bound the value for every transport (sizes in bytes,
	// durations in nanoseconds); Max 0 means none.
	Min, Max int64
	// Limits are tighter maxima for one transport, each with the reason
	// node enforces it. Limits that depend on the device are checked by
	// runner check instead.
	Limits []Limit
	// Transports lists the transports the param applies to; nil: all. For
	// the others its flag is not passed and its column is empty.
	Transports []string
	// PerHost params may also be written under hosts.<role>.<section>,
	// overriding the plan's value for that role.
	PerHost bool
	// Sweep says whether sweep.zip and sweep.matrix may vary it. Only a
	// param with a CSV column can be swept, so every row says its value.
	Sweep bool
	// Flag is node's flag, without dashes, given to Role: "serve", "read"
	// or "both". A KindBool flag is passed only when true.
	Flag, Role string
	// Since is the schema version that added the param. Params of version
	// 1 are always in a point's key; later ones enter it only when they
	// differ from their default, so adding a param never changes the keys
	// of points that leave it alone.
	Since int
	// Unkeyed params change nothing a point measures (a permission, such
	// as trust_odp): they never enter the point key, so setting one does
	// not make done points run again.
	Unkeyed bool
	// Doc says what the plan field does, in one or two sentences.
	Doc string
	// cell overrides the CSV cell's value (total's column records what
	// the point reads), and none is the cell that means the param does not
	// apply to the point, shown as "-".
	cell func(v Values) string
	none string
	// when, if set, narrows the points the param applies to beyond its
	// transports (odp_prefetch: registration odp only): elsewhere its flag
	// is not passed and its cell is empty.
	when func(v Values) bool
	// id is the param's constant, set from its Name when the table loads.
	id param.ID
}

// Kind is how a param's value is written, checked and recorded.
type Kind int

const (
	KindSize     Kind = iota // bytes, written 4KiB or 4096; recorded in bytes
	KindInt                  // a whole number
	KindEnum                 // one of Param.Enum
	KindBool                 // true or false
	KindDuration             // a Go duration, 5s; recorded in seconds
	KindPath                 // an absolute path on the host that uses it
	KindString               // free text, such as a device name
	KindRate                 // an offered load, 200MB/s or 50000iops (Rate); "" for none
)

// Limit is the largest value one transport takes, and why.
type Limit struct {
	Transport string
	Max       int64
	Why       string
}

// Values are one point's parameter values, as results sees them; plan's
// values implement it. Int serves sizes (bytes), ints and durations
// (nanoseconds); an Auto param left to auto reads as -1. A param is named
// by its constant (param.CQModeration), never by a string, so a misspelt
// name fails the build.
type Values interface {
	Int(id param.ID) int64
	Str(id param.ID) string
	Bool(id param.ID) bool
}

// ID is the param's constant in package param.
func (p *Param) ID() param.ID { return p.id }

// Unit names what the param's number counts, for docs: "bytes",
// "seconds" or "".
func (p *Param) Unit() string {
	switch p.Kind {
	case KindSize:
		return "bytes"
	case KindDuration:
		return "seconds"
	}
	return ""
}

// AppliesTo reports whether the param means anything under transport.
func (p *Param) AppliesTo(transport string) bool {
	return p.Transports == nil || slices.Contains(p.Transports, transport)
}

// appliesToPoint reports whether the param means anything for the point
// with values v, run over transport.
func (p *Param) appliesToPoint(transport string, v Values) bool {
	return p.AppliesTo(transport) && (p.when == nil || p.when(v))
}

// LimitFor is the largest value transport takes, and why: the tighter of
// Max and the transport's Limit. ok is false when there is no bound.
func (p *Param) LimitFor(transport string) (max int64, why string, ok bool) {
	max, ok = p.Max, p.Max > 0
	for _, l := range p.Limits {
		if l.Transport == transport && (!ok || l.Max < max) {
			max, why, ok = l.Max, l.Why, true
		}
	}
	return max, why, ok
}

// Format renders a value as a plan writes it: sizes in exact binary units,
// durations as Go strings, auto as its AutoWord.
func (p *Param) Format(v Values) string {
	switch p.Kind {
	case KindSize:
		return FormatSize(v.Int(p.id))
	case KindInt:
		n := v.Int(p.id)
		if p.Auto && n < 0 {
			return p.AutoText()
		}
		return strconv.FormatInt(n, 10)
	case KindDuration:
		if n := v.Int(p.id); p.Auto && n < 0 {
			return p.AutoText()
		}
		return time.Duration(v.Int(p.id)).String()
	case KindBool:
		return strconv.FormatBool(v.Bool(p.id))
	}
	return v.Str(p.id)
}

// Cell is the param's CSV cell for a point of transport: sizes in bytes,
// durations in seconds, empty where the param does not apply.
func (p *Param) Cell(transport string, v Values) string {
	if !p.appliesToPoint(transport, v) {
		return ""
	}
	if p.cell != nil {
		return p.cell(v)
	}
	switch p.Kind {
	case KindSize, KindInt:
		return formatInt(v.Int(p.id))
	case KindDuration:
		return strconv.FormatFloat(time.Duration(v.Int(p.id)).Seconds(), 'f', -1, 64)
	case KindBool:
		return strconv.FormatBool(v.Bool(p.id))
	}
	return v.Str(p.id)
}

// Display turns a CSV cell of the param into what people read: sizes in
// binary units, durations with their unit, "-" for an empty cell.
func (p *Param) Display(cell string) string {
	if cell == "" || p.none != "" && cell == p.none {
		return "-"
	}
	switch p.Kind {
	case KindSize:
		if n, err := strconv.ParseInt(cell, 10, 64); err == nil {
			return FormatSize(n)
		}
	case KindDuration:
		if f, err := strconv.ParseFloat(cell, 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64) + "s"
		}
	case KindRate:
		if f, err := strconv.ParseFloat(cell, 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64) + "MB/s"
		}
	}
	return cell
}

// Argv is the param's node flag and value for a point of transport, or
// nothing: when it does not apply, for a bool at its default, an unset
// string and an auto value (node's own default then holds). A bool is
// passed as --flag when true and --flag=false when false.
func (p *Param) Argv(transport string, v Values) []string {
	if p.Flag == "" || !p.appliesToPoint(transport, v) {
		return nil
	}
	flag := "--" + p.Flag
	switch p.Kind {
	case KindBool:
		switch b := v.Bool(p.id); {
		case strconv.FormatBool(b) == p.Default || !b && p.Default == "":
			return nil
		case b:
			return []string{flag}
		}
		return []string{flag + "=false"}
	case KindSize, KindInt:
		n := v.Int(p.id)
		if p.Auto && n < 0 {
			return nil
		}
		return []string{flag, strconv.FormatInt(n, 10)}
	case KindDuration:
		if n := v.Int(p.id); p.Auto && n < 0 {
			return []string{flag, p.AutoText()} // node's default is no auto
		}
		return []string{flag, time.Duration(v.Int(p.id)).String()}
	}
	s := v.Str(p.id)
	if s == "" {
		return nil
	}
	return []string{flag, s}
}

// AutoText is how a plan writes the param's auto value: its AutoWord, or
// "auto".
func (p *Param) AutoText() string {
	if p.AutoWord != "" {
		return p.AutoWord
	}
	return "auto"
}

// TakenBy reports whether node's role ("serve" or "read") takes the flag.
func (p *Param) TakenBy(role string) bool {
	return p.Flag != "" && (p.Role == role || p.Role == "both")
}

// Path is the param's dotted plan path, e.g. client.block_size.
func (p *Param) Path() string {
	if p.Section == "" {
		return p.Name
	}
	return p.Section + "." + p.Name
}

// EffectiveTotal is the bytes a point reads: total, or file_size when
// total is 0; 0 when the point reads for a duration instead.
func EffectiveTotal(v Values) int64 {
	switch {
	case v.Int(param.Duration) > 0:
		return 0
	case v.Int(param.Total) > 0:
		return v.Int(param.Total)
	}
	return v.Int(param.FileSize)
}

// ParamOf returns the param of id: the schema's entry for a constant of
// package param.
func ParamOf(id param.ID) *Param {
	p := ParamByName(id.String())
	if p == nil {
		panic("results: no param " + id.String() + " in the schema; run go generate ./results")
	}
	return p
}

// ParamByName returns the param called name, or nil: for names read from a
// plan or a command line. Code uses ParamOf.
func ParamByName(name string) *Param {
	for _, p := range params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Params lists every param in table order.
func Params() []*Param { return slices.Clone(params) }

// SectionParams lists the params a plan writes in section, in table order.
func SectionParams(section string) []*Param {
	var out []*Param
	for _, p := range params {
		if p.Section == section {
			out = append(out, p)
		}
	}
	return out
}

// SweepableParams names the params sweep.zip and sweep.matrix may vary.
func SweepableParams() []string {
	var names []string
	for _, p := range params {
		if p.Sweep {
			names = append(names, p.Name)
		}
	}
	return names
}

// LimitsText is "tcp ≤ 256MiB (the tcp wire's largest reply)"…, for docs.
func (p *Param) LimitsText() string {
	var parts []string
	for _, l := range p.Limits {
		v := strconv.FormatInt(l.Max, 10)
		if p.Kind == KindSize {
			v = FormatSize(l.Max)
		}
		parts = append(parts, fmt.Sprintf("%s ≤ %s (%s)", l.Transport, v, l.Why))
	}
	return strings.Join(parts, "; ")
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
