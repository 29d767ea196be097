package plan

import (
	"fmt"
	"strconv"
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// The parameters are results' table (results/schema.go): their names,
// sections, kinds, defaults, limits, columns and node flags. This file
// holds how plan stores and compares their values.

// value holds one parameter value; which field is meaningful depends on
// the parameter's kind: n for sizes, ints (-1: auto) and durations, s for
// enums, paths and strings, b for bools.
type value struct {
	n int64
	s string
	b bool
}

// Values are parameter values: a plan's base values, a point's, or one
// host's overrides. They implement results.Values. Code names a parameter
// by its constant (param.BlockSize), so a misspelt name fails the build;
// inside, the values are kept by name, as plans write them.
type Values struct{ m map[string]value }

// Int is a size in bytes, an integer (-1 for auto) or a duration in
// nanoseconds.
func (v Values) Int(id param.ID) int64 { return v.of(id).n }

// Str is an enum, path or string value.
func (v Values) Str(id param.ID) string { return v.of(id).s }

// Bool is a bool value.
func (v Values) Bool(id param.ID) bool { return v.of(id).b }

// Duration is a duration value.
func (v Values) Duration(id param.ID) time.Duration { return time.Duration(v.of(id).n) }

// of is the value of parameter id. It panics on an id the schema lacks:
// results/param/names.go is stale (go generate ./results), which every
// test that reaches the call finds.
func (v Values) of(id param.ID) value {
	x, ok := v.m[id.String()]
	if !ok && results.ParamByName(id.String()) == nil {
		panic("plan: no parameter " + id.String() + " in the schema; run go generate ./results")
	}
	return x
}

// get is the value of the parameter name, as the table and plans name it.
func (v Values) get(name string) value { return v.m[name] }

func (v Values) set(name string, x value) { v.m[name] = x }

func (v Values) clone() Values {
	m := make(map[string]value, len(v.m))
	for k, x := range v.m {
		m[k] = x
	}
	return Values{m}
}

// with returns v with each of over's values laid over it.
func (v Values) with(over Values) Values {
	out := v.clone()
	for k, x := range over.m {
		out.m[k] = x
	}
	return out
}

// one is a single value seen as results.Values, to format it.
type one struct {
	name string
	v    value
}

func (o one) Int(param.ID) int64              { return o.v.n }
func (o one) Str(param.ID) string             { return o.v.s }
func (o one) Bool(param.ID) bool              { return o.v.b }
func format(p *results.Param, v value) string { return p.Format(one{p.Name, v}) }

// defaults holds every parameter's default value; required ones are zero
// until a plan gives them.
var defaults = func() Values {
	d := Values{map[string]value{}}
	for _, p := range results.Params() {
		v, err := parseDefault(p)
		if err != nil {
			panic(fmt.Sprintf("plan: parameter %s: default %q: %v", p.Name, p.Default, err))
		}
		d.m[p.Name] = v
	}
	return d
}()

// parseDefault reads a parameter's default as a plan would write it.
func parseDefault(p *results.Param) (value, error) {
	if p.Required || p.Default == "" {
		if p.Auto {
			return value{n: -1}, nil
		}
		return value{}, nil
	}
	switch p.Kind {
	case results.KindSize:
		n, err := results.ParseSize(p.Default)
		return value{n: n}, err
	case results.KindInt:
		n, err := strconv.ParseInt(p.Default, 10, 64)
		return value{n: n}, err
	case results.KindDuration:
		d, err := time.ParseDuration(p.Default)
		return value{n: int64(d)}, err
	case results.KindBool:
		b, err := strconv.ParseBool(p.Default)
		return value{b: b}, err
	}
	return value{s: p.Default}, nil
}

// canonical is v as it appears in a point key's JSON: sizes and ints as
// numbers (auto as null), durations as Go duration strings.
func canonical(p *results.Param, v value) any {
	switch p.Kind {
	case results.KindSize, results.KindInt:
		if p.Auto && v.n < 0 {
			if p.AutoKey != 0 {
				return p.AutoKey
			}
			return nil
		}
		return v.n
	case results.KindBool:
		return v.b
	case results.KindDuration:
		if p.Auto && v.n < 0 {
			return p.AutoText()
		}
		return time.Duration(v.n).String()
	}
	return v.s
}

// paramByName finds a parameter by its name.
func paramByName(name string) *results.Param { return results.ParamByName(name) }

// sectionKeys names the fields of a plan section that are parameters.
func sectionKeys(section string, perHostOnly bool) []string {
	var names []string
	for _, p := range results.SectionParams(section) {
		if !perHostOnly || p.PerHost {
			names = append(names, p.Name)
		}
	}
	return names
}

// paramSections are the plan sections that hold parameters, besides the
// top level.
var paramSections = []string{"server", "client", results.SectionRDMA}

// hostSections are the sections a host may override.
var hostSections = func() []string {
	var out []string
	for _, s := range paramSections {
		if len(sectionKeys(s, true)) > 0 {
			out = append(out, s)
		}
	}
	return out
}()

// isInt reports whether p's value is read and compared as a number.
func isInt(p *results.Param) bool {
	return p.Kind == results.KindSize || p.Kind == results.KindInt
}

func unitWord(p *results.Param) string {
	if p.Kind == results.KindSize {
		return " of bytes"
	}
	return ""
}

// With returns a copy of v with parameter id set to x: an int or int64
// for sizes and ints, a time.Duration for durations, a string for enums,
// paths and strings, a bool for bools. It panics when x's type does not
// fit the parameter: that is a bug in the caller. Values it makes are not
// validated; runner check uses it for its probe point.
func (v Values) With(id param.ID, x any) Values {
	p := results.ParamOf(id)
	var val value
	switch x := x.(type) {
	case int:
		val.n = int64(x)
	case int64:
		val.n = x
	case time.Duration:
		val.n = int64(x)
	case string:
		val.s = x
	case bool:
		val.b = x
	}
	var ok bool
	switch x.(type) {
	case int, int64:
		ok = isInt(p)
	case time.Duration:
		ok = p.Kind == results.KindDuration
	case string:
		ok = p.Kind == results.KindEnum || p.Kind == results.KindPath || p.Kind == results.KindString || p.Kind == results.KindRate
	case bool:
		ok = p.Kind == results.KindBool
	}
	if !ok {
		panic(fmt.Sprintf("plan: Values.With(%s, %T) does not fit the parameter", id, x))
	}
	out := v.clone()
	out.set(p.Name, val)
	return out
}

// Defaults are every parameter at its default, as a plan that writes none
// has them (required ones zero, auto ones -1): a base for values made in
// code, as runner check's probes and tests make them, with With.
func Defaults() Values { return defaults.clone() }

// Default is parameter id's default, as With takes it: what a plan that
// leaves the parameter alone gets (-1 for auto). runner check's probes
// read their neutral values from here, not from copies of the table.
func Default(id param.ID) any {
	p, x := results.ParamOf(id), defaults.of(id)
	switch {
	case p.Kind == results.KindDuration:
		return time.Duration(x.n)
	case isInt(p):
		return x.n
	case p.Kind == results.KindBool:
		return x.b
	}
	return x.s
}
