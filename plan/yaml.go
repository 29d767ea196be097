package plan

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
)

// This file holds the loader's generic YAML walking: positions, errors,
// mappings with unknown and duplicate keys, and typed scalars.

// loader collects every error found while walking one plan.
type loader struct {
	file   string
	lines  int // lines in the file, to keep positions inside it
	errs   ErrorList
	origin map[*yaml.Node]origin // nodes that came from the command line
	roles  map[string]*yaml.Node // hosts.server and hosts.client's keys, for errors about them
	// allocation, under launcher: slurm, are the nodes a host must be.
	allocation []string
}

// origin names where a command-line value came from ("--set", "block_size").
type origin struct{ file, name string }

func newLoader(file string) *loader {
	return &loader{file: file, origin: map[*yaml.Node]origin{}, roles: map[string]*yaml.Node{}}
}

// errorf records a problem at node n (nil: no position). A node that came
// from --set or --only is reported under that flag and the name the user
// typed, since pointing into the file would mislead.
func (l *loader) errorf(n *yaml.Node, path, format string, args ...any) {
	e := &Error{File: l.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if o, ok := l.origin[n]; ok {
		e.File = o.file
		if o.name != "" {
			e.Path = o.name
		}
	} else if n != nil {
		e.Line, e.Col = n.Line, n.Column
		if e.Line > l.lines {
			// yaml.v3 places an implicit null at the end of input on the
			// line after the last; point at the last line instead.
			e.Line, e.Col = l.lines, 0
		}
	}
	l.errs = append(l.errs, e)
}

// parseYAML parses data into a document node, turning yaml.v3's syntax
// errors (and, defensively, its panics) into positioned errors.
func (l *loader) parseYAML(data []byte) (doc *yaml.Node) {
	defer func() {
		if r := recover(); r != nil {
			l.errs = append(l.errs, &Error{File: l.file, Msg: fmt.Sprintf("cannot parse YAML: %v", r)})
			doc = nil
		}
	}()
	l.lines = lineCount(data)
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		l.errs = append(l.errs, syntaxError(l.file, err, lineCount(data)))
		return nil
	}
	return &n
}

var yamlLineRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// parserProblems are yaml.v3's parser (not scanner) messages. For these it
// reports the 0-based line of the construct being parsed, e.g. where an
// unclosed "{" opened, while scanner errors carry 1-based lines.
var parserProblems = []string{
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected node content",
	"did not find expected <document start>",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

// syntaxError turns yaml.v3's "yaml: line 3: ..." into an Error at the
// right line (yaml.v3 gives no column, and no line at all for line 1).
func syntaxError(file string, err error, lines int) *Error {
	msg := err.Error()
	if te, ok := err.(*yaml.TypeError); ok {
		msg = "yaml: " + strings.Join(te.Errors, "; ")
	}
	m := yamlLineRe.FindStringSubmatch(msg)
	if m == nil {
		return &Error{File: file, Msg: "syntax error: " + msg}
	}
	line := 1 // yaml.v3 omits the line when the problem is on the first
	if m[1] != "" {
		line, _ = strconv.Atoi(m[1])
		if slices.Contains(parserProblems, m[2]) {
			line++
		}
	}
	line = max(min(line, lines), 1) // an error at EOF points past the last line
	problem := m[2]
	if slices.Contains(parserProblems, problem) {
		problem += " (in what starts on this line)"
	}
	return &Error{File: file, Line: line, Msg: "syntax error: " + problem}
}

// lineCount is the number of lines in data as YAML counts them (breaks
// are \n, \r\n, \r, and the Unicode NEL, LS and PS), a last line without
// a break included.
func lineCount(data []byte) int {
	n, open := 0, false
	for i := 0; i < len(data); i++ {
		brk := 0 // length of the line break at i, if any
		switch {
		case data[i] == '\n':
			brk = 1
		case data[i] == '\r':
			brk = 1
			if i+1 < len(data) && data[i+1] == '\n' {
				brk = 2
			}
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			brk = 2
		case bytes.HasPrefix(data[i:], []byte("\u2028")), bytes.HasPrefix(data[i:], []byte("\u2029")):
			brk = 3
		}
		if brk == 0 {
			open = true
			continue
		}
		n++
		open = false
		i += brk - 1
	}
	if open {
		n++
	}
	return n
}

// resolve follows aliases to the node they name. The bound stops alias
// cycles, which yaml.v3 should already refuse.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// describe names what n is, for "(got ...)" in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "an unexpected YAML node"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// field is one key of a mapping and its (alias-resolved) value.
type field struct{ key, val *yaml.Node }

// mapping checks that n is a mapping of known keys, reports unknown and
// duplicate keys, and returns the fields by key. A null n (a key written
// with nothing after it) is an empty mapping. ok is false when n is not a
// mapping at all.
func (l *loader) mapping(n *yaml.Node, path string, known []string) (fields map[string]field, ok bool) {
	fields = map[string]field{}
	n = resolve(n)
	if isNull(n) {
		return fields, true
	}
	if n.Kind != yaml.MappingNode {
		what := path
		if what == "" {
			what = "a plan"
		}
		l.errorf(n, path, "must be a mapping of %s fields (got %s)", strings.TrimPrefix(what, "a "), describe(n))
		return nil, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, path, "keys must be names (got %s)", describe(k))
			continue
		}
		name := k.Value
		if prev, dup := fields[name]; dup {
			l.errorf(k, join(path, name), "duplicate key (first at line %d)", prev.key.Line)
			continue
		}
		if !slices.Contains(known, name) {
			l.errorf(k, join(path, name), "unknown field%s", suggest(name, known))
			continue
		}
		fields[name] = field{k, v}
	}
	return fields, true
}

// suggest returns " (did you mean x?)" for a near miss, else the list of
// what is allowed.
func suggest(name string, known []string) string {
	if s, ok := synonyms[strings.ToLower(name)]; ok && slices.Contains(known, s) {
		return fmt.Sprintf(" (did you mean %s?)", s)
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return fmt.Sprintf(" (known: %s)", strings.Join(known, ", "))
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// scalar checks that n is a single value. Null counts as not written.
func (l *loader) scalar(n *yaml.Node, path, what string) (*yaml.Node, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, false
	}
	if n.Kind != yaml.ScalarNode {
		l.errorf(n, path, "must be %s (got %s)", what, describe(n))
		return nil, false
	}
	return n, true
}

// str reads an optional string field; anything scalar is taken as written.
func (l *loader) str(f map[string]field, key, path string) (string, *yaml.Node, bool) {
	n, ok := l.scalar(f[key].val, join(path, key), "a string")
	if !ok {
		return "", nil, false
	}
	return n.Value, n, true
}

// integer reads an optional integer field within [lo, hi].
func (l *loader) integer(f map[string]field, key, path string, lo, hi int64) (int64, *yaml.Node, bool) {
	p := join(path, key)
	n, ok := l.scalar(f[key].val, p, "an integer")
	if !ok {
		return 0, nil, false
	}
	v, ok := l.intValue(n, p, lo, hi)
	return v, n, ok
}

func (l *loader) intValue(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	var v int64
	if n.Tag != "!!int" || n.Decode(&v) != nil {
		l.errorf(n, path, "must be an integer (got %s)", describe(n))
		return 0, false
	}
	if v < lo || v > hi {
		l.errorf(n, path, "must be between %d and %d (got %d)", lo, hi, v)
		return 0, false
	}
	return v, true
}

// duration reads an optional duration field of at least lo.
func (l *loader) duration(f map[string]field, key, path string, lo int64) (int64, *yaml.Node, bool) {
	p := join(path, key)
	n, ok := l.scalar(f[key].val, p, "a duration")
	if !ok {
		return 0, nil, false
	}
	v, ok := l.durationValue(n, p, lo)
	return v, n, ok
}

func (l *loader) durationValue(n *yaml.Node, path string, lo int64) (int64, bool) {
	d, err := parseDuration(n.Value)
	if err != nil || (n.Tag != "!!str" && n.Tag != "!!int") {
		l.errorf(n, path, "must be a duration like 5s (got %s)", describe(n))
		return 0, false
	}
	if int64(d) < lo {
		if lo > 0 {
			l.errorf(n, path, "must be greater than 0 (got %s)", describe(n))
		} else {
			l.errorf(n, path, "must not be negative (got %s)", describe(n))
		}
		return 0, false
	}
	return int64(d), true
}

func (l *loader) boolValue(n *yaml.Node, path string) (bool, bool) {
	var b bool
	if n.Tag != "!!bool" || n.Decode(&b) != nil {
		l.errorf(n, path, "must be true or false (got %s)", describe(n))
		return false, false
	}
	return b, true
}

// enum reads an optional field that must be one of allowed.
func (l *loader) enum(f map[string]field, key, path string, allowed []string) (string, bool) {
	p := join(path, key)
	n, ok := l.scalar(f[key].val, p, "one of "+strings.Join(allowed, ", "))
	if !ok {
		return "", false
	}
	return l.enumValue(n, p, allowed)
}

func (l *loader) enumValue(n *yaml.Node, path string, allowed []string) (string, bool) {
	if !slices.Contains(allowed, n.Value) {
		hint := ""
		if s, ok := synonyms[strings.ToLower(n.Value)]; ok && slices.Contains(allowed, s) {
			hint = fmt.Sprintf(" (did you mean %s?)", s)
		}
		l.errorf(n, path, "must be one of %s (got %s)%s", strings.Join(allowed, ", "), describe(n), hint)
		return "", false
	}
	return n.Value, true
}

// sizeValue reads a size of at least lo bytes from a scalar.
func (l *loader) sizeValue(n *yaml.Node, path string, lo int64) (int64, bool) {
	if n.Tag != "!!int" && n.Tag != "!!str" {
		l.errorf(n, path, "must be a size like 4KiB (got %s)", describe(n))
		return 0, false
	}
	v, err := results.ParseSize(n.Value)
	if err != nil {
		l.errorf(n, path, "%v", err)
		return 0, false
	}
	if v < lo {
		if lo > 0 {
			l.errorf(n, path, "must be greater than 0 (got %s)", describe(n))
		} else {
			l.errorf(n, path, "must not be negative (got %s)", describe(n))
		}
		return 0, false
	}
	return v, true
}

// paramValue reads one value of parameter p from a node that must be a
// single value: "only sweep sweeps", so a list or a range here is an error
// that points the user at sweep.
func (l *loader) paramValue(p *results.Param, n *yaml.Node, path string, inSweep bool) (value, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		if o, ok := l.origin[n]; ok && o.file == "--set" {
			// --set picks one value for every point; it cannot write a
			// sweep, so pointing at sweep.matrix would send the user to
			// a --set that is refused.
			l.errorf(n, path, "must be a single value (got %s): --set gives every point one value, replacing the plan's sweep of %s; to sweep it, edit the plan's sweep.matrix.%s", describe(n), p.Name, p.Name)
		} else if inSweep {
			l.errorf(n, path, "must be a single value (got %s)", describe(n))
		} else {
			l.errorf(n, path, "must be a single value (got %s); only sweep sweeps: to vary %s, use sweep.matrix.%s or sweep.zip.%s", describe(n), p.Name, p.Name, p.Name)
		}
		return value{}, false
	}
	if isNull(n) {
		l.errorf(n, path, "must have a value")
		return value{}, false
	}
	switch p.Kind {
	case results.KindSize:
		// Max and the transports' limits are checked with the transport
		// known, in checkCombos.
		v, ok := l.sizeValue(n, path, p.Min)
		return value{n: v}, ok
	case results.KindInt:
		if p.Auto && n.Value == p.AutoText() {
			return value{n: -1}, true
		}
		v, ok := l.intValue(n, path, p.Min, p.Max)
		return value{n: v}, ok
	case results.KindEnum:
		v, ok := l.enumValue(n, path, p.Enum)
		return value{s: v}, ok
	case results.KindBool:
		v, ok := l.boolValue(n, path)
		return value{b: v}, ok
	case results.KindDuration:
		if p.Auto && n.Value == p.AutoText() {
			return value{n: -1}, true
		}
		v, ok := l.durationValue(n, path, p.Min)
		return value{n: v}, ok
	case results.KindPath:
		if !strings.HasPrefix(n.Value, "/") {
			l.errorf(n, path, "must be an absolute path on the %s host (got %s)", p.Section, describe(n))
			return value{}, false
		}
		return value{s: n.Value}, true
	case results.KindString:
		return value{s: n.Value}, true
	case results.KindRate:
		if _, err := results.ParseRate(n.Value); err != nil || n.Value == "" {
			if err == nil {
				err = fmt.Errorf("must be a rate like 200MB/s or 50000iops (got %s)", describe(n))
			}
			l.errorf(n, path, "%v", err)
			return value{}, false
		}
		return value{s: n.Value}, true
	}
	panic("plan: unknown parameter kind")
}
