package plan

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
)

// setPaths lists every dotted path --set accepts besides bare parameter
// names. Sweep itself is not settable: --set picks one value, it does not
// describe a sweep.
var setPaths = func() []string {
	// Whole values too: a list of pool hosts, of expectations, a search.
	paths := []string{"name", "description", "repeat", "launcher", "hosts.pool", "expect", "search"}
	for _, k := range sshKeys {
		paths = append(paths, "ssh."+k)
	}
	for _, k := range nodeKeys {
		paths = append(paths, "node."+k)
	}
	for _, role := range roleKeys {
		for _, k := range hostKeys {
			if slices.Contains(hostSections, k) {
				for _, name := range sectionKeys(k, true) {
					paths = append(paths, "hosts."+role+"."+k+"."+name)
				}
				continue
			}
			paths = append(paths, "hosts."+role+"."+k)
		}
	}
	for _, k := range timeoutKeys {
		paths = append(paths, "timeouts."+k)
	}
	for _, k := range outputKeys {
		paths = append(paths, "output."+k)
	}
	for _, p := range results.Params() {
		paths = append(paths, p.Path())
	}
	return paths
}()

// applySets writes each --set into the document tree before it is walked,
// so a set value is checked exactly like one written in the file. It
// returns the parameters whose sweep a --set replaced.
func (l *loader) applySets(root *yaml.Node, sets []string) map[string]bool {
	unswept := map[string]bool{}
	for _, s := range sets {
		name, val, ok := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			l.errs = append(l.errs, &Error{File: "--set", Path: s, Msg: "must be name=value"})
			continue
		}
		path := name
		p := paramByName(name)
		if p != nil {
			path = p.Path()
		} else if !slices.Contains(setPaths, name) {
			l.errs = append(l.errs, &Error{File: "--set", Path: name, Msg: "unknown parameter or field" + setSuggest(name)})
			continue
		} else if sec, pname, ok := strings.Cut(name, "."); ok && slices.Contains(paramSections, sec) {
			p = paramByName(pname)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(val), &doc); err != nil {
			l.errs = append(l.errs, &Error{File: "--set", Path: name, Msg: "value is not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")})
			continue
		}
		vn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
		if len(doc.Content) > 0 {
			vn = doc.Content[0]
		}
		// A whole value's inner nodes (expect's items) keep the field
		// path the walk gives them, under --set.
		markSet(l.origin, vn)
		l.origin[vn] = origin{"--set", name}
		if p != nil && unsweep(root, p.Name) {
			unswept[p.Name] = true // only zip matters: see fitZip
		}
		setIn(root, strings.Split(path, "."), vn)
	}
	return unswept
}

// markSet marks n and every node under it as from --set, each named by
// the path the walk reports it at.
func markSet(from map[*yaml.Node]origin, n *yaml.Node) {
	from[n] = origin{"--set", ""}
	for _, c := range n.Content {
		markSet(from, c)
	}
}

// setSuggest names the nearest valid --set name, or says what is valid;
// the full list of dotted paths is too long for one line.
func setSuggest(name string) string {
	names := slices.Clone(setPaths)
	var pnames []string
	for _, p := range results.Params() {
		pnames = append(pnames, p.Name)
	}
	names = append(names, pnames...)
	if s := suggest(name, names); strings.HasPrefix(s, " (did you mean") {
		return s
	}
	return " (parameters: " + strings.Join(pnames, ", ") + "; other fields by dotted path, e.g. ssh.connect_timeout)"
}

// valueOf returns the index in m.Content of the value for key, or -1.
func valueOf(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return i + 1
		}
	}
	return -1
}

// ownMapping returns the mapping at m.Content[i], creating it when absent
// or null and copying it when it is an alias (so a --set through one alias
// does not change the anchor's other uses). nil when it is something else,
// which the walk will report.
func ownMapping(m *yaml.Node, i int) *yaml.Node {
	n := m.Content[i]
	if n.Kind == yaml.AliasNode {
		r := resolve(n)
		if r == nil || r.Kind != yaml.MappingNode {
			return nil
		}
		c := *r
		c.Content = slices.Clone(r.Content)
		m.Content[i] = &c
		return &c
	}
	if isNull(n) {
		c := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
		m.Content[i] = c
		return c
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	return n
}

// setIn sets keys (a dotted path) in mapping m to v, creating mappings on
// the way. Every duplicate of the last key is set, so the duplicate is
// still reported but the --set wins either way.
func setIn(m *yaml.Node, keys []string, v *yaml.Node) {
	for _, k := range keys[:len(keys)-1] {
		i := valueOf(m, k)
		if i < 0 {
			m.Content = append(m.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k},
				&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
			i = len(m.Content) - 1
		}
		if m = ownMapping(m, i); m == nil {
			return
		}
	}
	last, found := keys[len(keys)-1], false
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == last {
			m.Content[i+1], found = v, true
		}
	}
	if !found {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: last}, v)
	}
}

// unsweep removes parameter name from sweep.zip and sweep.matrix, dropping
// a group, or the whole sweep, that it leaves empty. It reports whether
// the parameter was taken out of sweep.zip, where the others may have
// taken their length from it.
func unsweep(root *yaml.Node, name string) bool {
	si := valueOf(root, "sweep")
	if si < 0 {
		return false
	}
	sw := ownMapping(root, si)
	if sw == nil || len(sw.Content) == 0 {
		return false
	}
	removed, fromZip := false, false
	for _, group := range sweepKeys {
		gi := valueOf(sw, group)
		if gi < 0 {
			continue
		}
		g := ownMapping(sw, gi)
		if g == nil || len(g.Content) == 0 {
			continue
		}
		before := len(g.Content)
		g.Content = deleteKey(g.Content, name)
		if len(g.Content) == before {
			continue
		}
		removed = true
		fromZip = fromZip || group == "zip"
		if len(g.Content) == 0 {
			sw.Content = deleteKey(sw.Content, group)
		}
	}
	if removed && len(sw.Content) == 0 {
		root.Content = deleteKey(root.Content, "sweep")
	}
	return fromZip
}

func deleteKey(content []*yaml.Node, key string) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(content); i += 2 {
		if k := resolve(content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			continue
		}
		out = append(out, content[i], content[i+1])
	}
	return out
}
