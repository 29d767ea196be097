package plan

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"rdmasweep/internal/sshname"
	"rdmasweep/results"
)

// The keys each mapping may hold. They double as the --set vocabulary.
var (
	topKeys     = append([]string{"name", "description", "launcher", "hosts", "ssh", "node", "server", "client", results.SectionRDMA, "sweep", "repeat", "timeouts", "output", "expect", "search"}, sectionKeys("", false)...)
	roleKeys    = []string{"server", "client"}
	hostKeys    = append([]string{"address", "port", "user", "identity_file", "jump", "data_address", "cpus"}, hostSections...)
	sshKeys     = []string{"known_hosts", "host_key_policy", "connect_timeout", "keepalive_interval"}
	nodeKeys    = []string{"binary", "remote_path"}
	timeoutKeys = []string{"ready", "accept", "point"}
	outputKeys  = []string{"csv", "logs"}
	sweepKeys   = []string{"zip", "matrix"}

	hostKeyPolicies = []string{"strict", "accept-new", "insecure"}
	launchers       = []string{"ssh", "slurm"}
)

// Defaults that are not parameters.
const (
	defaultRemotePath = "/var/tmp/rdmasweep-" + UIDToken + "/node"
	defaultLogs       = "out/logs"
)

var nameRe = regexp.MustCompile(`^[a-z0-9-]+$`)

// parseDuration is time.ParseDuration; a bare 0 is a duration too.
var parseDuration = time.ParseDuration

// Parse is Load for a plan already in memory; name is the file name used in
// messages and in Plan.Path.
func Parse(name string, data []byte, opts Options) (*Plan, error) {
	p, err := parse(name, data, opts)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// parse is Parse, with the plan as far as it loaded beside its errors:
// nil only when the file is no mapping of plan fields.
func parse(name string, data []byte, opts Options) (*Plan, error) {
	l := newLoader(name)
	doc := l.parseYAML(data)
	if doc == nil {
		return nil, l.errs.sorted()
	}
	var root *yaml.Node
	if len(doc.Content) > 0 {
		root = resolve(doc.Content[0])
	}
	if isNull(root) {
		return nil, ErrorList{{File: name, Msg: "plan is empty"}}
	}
	if root.Kind != yaml.MappingNode {
		l.errorf(root, "", "must be a mapping of plan fields (got %s)", describe(root))
		return nil, l.errs.sorted()
	}
	unswept := l.applySets(root, opts.Set)
	p := &Plan{Path: name, Source: data}
	l.plan(root, p, opts, unswept)
	return p, l.errs.sorted()
}

// ParseExpanded is Parse, then Expand with xo, in one report. Where Parse
// finds errors in a mapping of plan fields, Expand still runs on what
// loaded, so what only expansion sees (a point's workload refused, a
// per-point rule) comes in the same ErrorList; of those, an error at a
// place Parse already reported is left out, as the same mistake's echo.
func ParseExpanded(name string, data []byte, opts Options, xo ExpandOptions) (*Plan, []Point, error) {
	p, perr := parse(name, data, opts)
	if p == nil {
		return nil, nil, perr
	}
	xo.partial = perr != nil
	pts, err := Expand(p, xo)
	if perr == nil {
		if err != nil {
			return nil, nil, err
		}
		return p, pts, nil
	}
	errs := perr.(ErrorList)
	var more ErrorList
	if errors.As(err, &more) {
		at := map[[2]int]bool{}
		for _, e := range errs {
			at[[2]int{e.Line, e.Col}] = true
		}
		for _, e := range more {
			if e.Line == 0 || !at[[2]int{e.Line, e.Col}] {
				errs = append(errs, e)
			}
		}
	}
	return nil, nil, errs.sorted()
}

// LoadExpanded is ParseExpanded of the file at path.
func LoadExpanded(path string, opts Options, xo ExpandOptions) (*Plan, []Point, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, ErrorList{{File: path, Msg: "cannot read plan: " + errText(err)}}
	}
	return ParseExpanded(path, data, opts, xo)
}

// plan walks the top-level mapping into p.
func (l *loader) plan(root *yaml.Node, p *Plan, opts Options, unswept map[string]bool) {
	f, _ := l.mapping(root, "", topKeys)

	if name, n, ok := l.str(f, "name", ""); ok {
		if !nameRe.MatchString(name) {
			l.errorf(n, "name", "must be lowercase letters, digits and dashes (got %q)", name)
		}
		p.Name = name
	} else if isNull(f["name"].val) {
		at := root
		if f["name"].key != nil {
			at = f["name"].key
		}
		l.errorf(at, "name", "required")
	}
	p.Description, _, _ = l.str(f, "description", "")

	base := l.params(f, p)
	p.Launcher = launchers[0]
	launcherAt := root
	if v, ok := l.enum(f, "launcher", "", launchers); ok {
		p.Launcher, launcherAt = v, f["launcher"].val
	}
	if p.Launcher == "slurm" {
		l.slurmHosts(root, f, p, launcherAt, opts)
	} else {
		l.hosts(root, f, p)
	}
	l.ssh(f["ssh"].val, p)
	l.node(f["node"].val, p, opts)

	p.Repeat = 1
	if r, _, ok := l.integer(f, "repeat", "", 1, 1<<20); ok {
		p.Repeat = int(r)
	}
	l.timeouts(f["timeouts"].val, p)
	l.output(f["output"].val, p)
	l.expect(f["expect"].val, p)

	if sf, ok := f["sweep"]; ok {
		p.sweep = l.sweep(sf, unswept)
	}
	if sf, ok := f["search"]; ok {
		l.search(sf, p)
	}
	l.required(root, f, p, base)
	l.checkCombos(root, p, base)
	p.written, p.origin = map[string]*yaml.Node{}, l.origin
	for name, b := range base {
		p.written[name] = b.node
	}
}

// slurmHosts are the roles' hosts under launcher: slurm: the nodes of the
// allocation the runner runs in. Without a hosts section the server is its
// first node and the clients are the rest; named nodes must be in it.
func (l *loader) slurmHosts(root *yaml.Node, top map[string]field, p *Plan, at *yaml.Node, opts Options) {
	var nodes []string
	var err error
	if opts.Allocation == nil {
		err = errors.New("no allocation was given")
	} else {
		nodes, err = opts.Allocation()
	}
	if err != nil {
		l.errorf(at, "launcher", "slurm runs the roles as steps of the Slurm allocation the runner runs in: %v; run the runner under salloc, srun or in an sbatch script, or name the nodes with --nodes LIST to validate or plan it here", err)
		return
	}
	if _, written := top["hosts"]; written {
		l.allocation = nodes
		l.hosts(root, top, p)
		return
	}
	node := func(name string) Host {
		h := Host{Address: name, Params: Values{map[string]value{}}}
		for _, sec := range hostSections {
			for _, n := range sectionKeys(sec, true) {
				h.Params.set(n, p.Base.get(n))
			}
		}
		return h
	}
	if p.IsPool() {
		l.allocationPool(at, p, nodes, node)
		return
	}
	if len(nodes) < 2 {
		l.errorf(at, "launcher", "the allocation has %d node (%s); the server and a client need 2: allocate with salloc -N2 or more, or name the hosts", len(nodes), strings.Join(nodes, ", "))
		return
	}
	p.Hosts = Hosts{Servers: []Host{node(nodes[0])}, listed: map[string]bool{"client": len(nodes) > 2}}
	for _, n := range nodes[1:] {
		p.Hosts.Clients = append(p.Hosts.Clients, node(n))
	}
}

func (l *loader) hosts(root *yaml.Node, top map[string]field, p *Plan) {
	hf, ok := top["hosts"]
	if !ok {
		l.errorf(root, "hosts", "required (hosts.server and hosts.client)")
		return
	}
	f, ok := l.mapping(hf.val, "hosts", hostsKeys)
	if !ok {
		return
	}
	if _, written := f["pool"]; written || p.IsPool() {
		l.pool(hf, f, p)
		return
	}
	p.Hosts.listed = map[string]bool{}
	for _, role := range roleKeys {
		path := "hosts." + role
		rf, ok := f[role]
		if !ok {
			at := hf.val
			if isNull(at) {
				at = hf.key
			}
			l.errorf(at, path, "required")
			continue
		}
		l.roles[role] = rf.key
		// One host, or a list of them.
		var hs []Host
		if n := resolve(rf.val); n != nil && n.Kind == yaml.SequenceNode {
			if len(n.Content) == 0 {
				l.errorf(n, path, "must list at least one host")
			}
			for i, item := range n.Content {
				hs = append(hs, l.host(field{key: rf.key, val: item}, fmt.Sprintf("%s[%d]", path, i), p.Base))
			}
			p.Hosts.listed[role] = true
		} else {
			hs = []Host{l.host(rf, path, p.Base)}
		}
		if role == "server" {
			p.Hosts.Servers = hs
		} else {
			p.Hosts.Clients = hs
		}
	}
}

func (l *loader) host(hf field, path string, base Values) Host {
	h := Host{Params: Values{map[string]value{}}}
	for _, sec := range hostSections {
		for _, name := range sectionKeys(sec, true) {
			h.Params.set(name, base.get(name))
		}
	}
	f, ok := l.mapping(hf.val, path, hostKeys)
	if !ok {
		return h
	}
	at := hf.val
	if isNull(at) {
		at = hf.key
	}
	a, n, ok := l.str(f, "address", path)
	switch {
	case ok && strings.TrimSpace(a) == "":
		l.errorf(n, path+".address", "must not be empty (an address, an ssh_config alias, or local)")
	case ok && strings.ContainsAny(a, " \t@"):
		l.errorf(n, path+".address", "must be a host name, address or ssh_config alias, without spaces or user@ (got %q); put the user in user:", a)
	case ok:
		if err := sshname.Host(a); err != nil {
			l.errorf(n, path+".address", "must not hold what a shell would interpret, as OpenSSH requires of a host name: %v (got %q)", err, a)
		}
		h.Address = a
	case isNull(f["address"].val):
		if f["address"].key != nil {
			at = f["address"].key
		}
		l.errorf(at, path+".address", "required (an address, an ssh_config alias, or local)")
	}
	if l.allocation != nil && h.Address != "" && !slices.Contains(l.allocation, h.Address) {
		l.errorf(n, path+".address", "%s is not a node of this allocation (its nodes: %s)", h.Address, strings.Join(l.allocation, ", "))
	}
	if v, _, ok := l.integer(f, "port", path, 1, 65535); ok {
		h.Port = int(v)
	}
	if v, n, ok := l.str(f, "user", path); ok {
		if err := sshname.User(v); err != nil {
			l.errorf(n, path+".user", "must not hold what a shell would interpret, as OpenSSH requires of a user name: %v (got %q)", err, v)
		}
		h.User = v
	}
	if v, n, ok := l.str(f, "identity_file", path); ok {
		h.IdentityFile = l.expandHome(v, n, path+".identity_file")
	}
	if v, n, ok := l.str(f, "jump", path); ok {
		if msg := checkJump(v); msg != "" {
			l.errorf(n, path+".jump", "%s (got %q)", msg, v)
		}
		h.Jump = v
	}
	h.DataAddress, _, _ = l.str(f, "data_address", path)
	if v, n, ok := l.str(f, "cpus", path); ok {
		if !validCPUList(v) {
			l.errorf(n, path+".cpus", "must be a CPU list like 0-3,8 (got %q)", v)
		}
		h.CPUs = v
	}
	for _, sec := range hostSections {
		sf, ok := l.mapping(f[sec].val, path+"."+sec, sectionKeys(sec, true))
		if !ok {
			continue
		}
		for name, fld := range sf {
			if isNull(fld.val) {
				continue
			}
			if v, ok := l.paramValue(paramByName(name), fld.val, path+"."+sec+"."+name, false); ok {
				h.Params.set(name, v)
			}
		}
	}
	return h
}

// checkJump validates "[user@]host[:port]" (an IPv6 host in brackets) and
// returns what is wrong, or "".
func checkJump(s string) string {
	const want = "must be [user@]host[:port]"
	hostport := s
	if i := strings.LastIndex(s, "@"); i >= 0 {
		if i == 0 || strings.ContainsAny(s[:i], "@:/ ") {
			return want
		}
		hostport = s[i+1:]
	}
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.Index(hostport, "]")
		if end < 0 {
			return want
		}
		host, port = hostport[1:end], strings.TrimPrefix(hostport[end+1:], ":")
		if rest := hostport[end+1:]; rest != "" && !strings.HasPrefix(rest, ":") {
			return want
		}
		if strings.HasPrefix(hostport[end+1:], ":") && port == "" {
			return want
		}
	} else if i := strings.LastIndex(hostport, ":"); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
		if port == "" {
			return want
		}
	}
	if host == "" || strings.ContainsAny(host, " /@,") || (!strings.HasPrefix(hostport, "[") && strings.Contains(host, ":")) {
		return want
	}
	// As OpenSSH checks -J: the hop's names reach its ProxyCommand too.
	if err := sshname.Host(host); err != nil {
		return fmt.Sprintf("its host must not hold what a shell would interpret, as OpenSSH requires: %v", err)
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		if err := sshname.User(s[:i]); err != nil {
			return fmt.Sprintf("its user must not hold what a shell would interpret, as OpenSSH requires: %v", err)
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "port must be between 1 and 65535"
		}
	}
	return ""
}

// validCPUList accepts taskset's list form: comma-separated CPUs and
// ascending ranges, e.g. "0-3,8".
func validCPUList(s string) bool {
	if s == "" {
		return false
	}
	for item := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil || strings.HasPrefix(lo, "+") {
			return false
		}
		if isRange {
			b, err := strconv.ParseUint(hi, 10, 16)
			if err != nil || strings.HasPrefix(hi, "+") || b < a {
				return false
			}
		}
	}
	return true
}

func (l *loader) ssh(n *yaml.Node, p *Plan) {
	// known_hosts and keepalive_interval stay unset unless written: the
	// ssh layer then takes ssh_config's, then its defaults (docs/ssh.md).
	// host_key_policy too: unset, the runner's flag, then ssh_config
	// decide, and then strict (runner/hosts/remote, hostKeyPolicy).
	p.SSH = SSH{ConnectTimeout: 10 * time.Second}
	f, ok := l.mapping(n, "ssh", sshKeys)
	if !ok {
		return
	}
	if v, n, ok := l.str(f, "known_hosts", "ssh"); ok {
		p.SSH.KnownHosts = l.expandHome(v, n, "ssh.known_hosts")
	}
	if v, ok := l.enum(f, "host_key_policy", "ssh", hostKeyPolicies); ok {
		p.SSH.HostKeyPolicy = v
	}
	if v, _, ok := l.duration(f, "connect_timeout", "ssh", 1); ok {
		p.SSH.ConnectTimeout = time.Duration(v)
	}
	if v, _, ok := l.duration(f, "keepalive_interval", "ssh", 1); ok {
		p.SSH.KeepaliveInterval = time.Duration(v)
	}
}

func (l *loader) node(n *yaml.Node, p *Plan, opts Options) {
	p.Node = Node{Binary: opts.NodeBinary, RemotePath: defaultRemotePath}
	f, ok := l.mapping(n, "node", nodeKeys)
	if !ok {
		return
	}
	if v, n, ok := l.str(f, "binary", "node"); ok {
		p.Node.Binary = l.expandHome(v, n, "node.binary")
	}
	if v, n, ok := l.str(f, "remote_path", "node"); ok {
		if !path.IsAbs(v) || path.Clean(v) == "/" {
			l.errorf(n, "node.remote_path", "must be an absolute file path on the remote host (got %q)", v)
		}
		p.Node.RemotePath = v
	}
}

func (l *loader) timeouts(n *yaml.Node, p *Plan) {
	p.Timeouts = Timeouts{Ready: 2 * time.Minute, Accept: time.Minute, Point: 10 * time.Minute}
	f, ok := l.mapping(n, "timeouts", timeoutKeys)
	if !ok {
		return
	}
	var at *yaml.Node
	readyOK, pointOK := true, true
	if v, n, ok := l.duration(f, "ready", "timeouts", 1); ok {
		p.Timeouts.Ready, at = time.Duration(v), n
	} else {
		readyOK = f["ready"].key == nil
	}
	if v, _, ok := l.duration(f, "accept", "timeouts", 1); ok {
		p.Timeouts.Accept = time.Duration(v)
	}
	if v, n, ok := l.duration(f, "point", "timeouts", 1); ok {
		p.Timeouts.Point = time.Duration(v)
		if at == nil {
			at = n
		}
	} else {
		pointOK = f["point"].key == nil
	}
	if readyOK && pointOK && p.Timeouts.Ready >= p.Timeouts.Point {
		l.errorf(at, "timeouts.ready", "must be shorter than timeouts.point (%v is not shorter than %v)", p.Timeouts.Ready, p.Timeouts.Point)
	}
}

func (l *loader) output(n *yaml.Node, p *Plan) {
	p.Output = Output{CSV: "out/" + p.Name + ".csv", Logs: defaultLogs}
	f, ok := l.mapping(n, "output", outputKeys)
	if !ok {
		return
	}
	if v, n, ok := l.str(f, "csv", "output"); ok {
		p.Output.CSV = l.expandHome(v, n, "output.csv")
	}
	if v, n, ok := l.str(f, "logs", "output"); ok {
		p.Output.Logs = l.expandHome(v, n, "output.logs")
	}
}

// expandHome expands a leading "~" or "~/" to the home directory. Other
// "~user" forms are left alone, as a shell without that user would.
func (l *loader) expandHome(s string, n *yaml.Node, path string) string {
	if s != "~" && !strings.HasPrefix(s, "~/") {
		return s
	}
	home, err := os.UserHomeDir()
	if err != nil {
		l.errorf(n, path, "cannot expand ~: %v", err)
		return s
	}
	return home + s[1:]
}

// baseValue is a parameter's value before the sweep and where it was
// written (nil node: the default).
type baseValue struct {
	v    value
	node *yaml.Node
}

// params reads the parameters of the top level and of every section into
// p.Base, over their defaults, and returns each one's base value and
// position for the cross-field checks.
func (l *loader) params(top map[string]field, p *Plan) map[string]baseValue {
	p.Base = defaults.clone()
	base := map[string]baseValue{}
	for _, section := range append([]string{""}, paramSections...) {
		f := top
		if section != "" {
			var ok bool
			if f, ok = l.mapping(top[section].val, section, sectionKeys(section, false)); !ok {
				f = nil
			}
		}
		for _, prm := range results.SectionParams(section) {
			fld, has := f[prm.Name]
			if has && !isNull(fld.val) {
				if v, ok := l.paramValue(prm, fld.val, prm.Path(), false); ok {
					p.Base.set(prm.Name, v)
				}
			}
			base[prm.Name] = baseValue{p.Base.get(prm.Name), resolve(fld.val)}
		}
	}
	return base
}

// required reports each required parameter that is neither written nor
// swept: a swept one needs no base value.
func (l *loader) required(root *yaml.Node, top map[string]field, p *Plan, base map[string]baseValue) {
	for _, prm := range results.Params() {
		if !prm.Required || base[prm.Name].node != nil || p.sweep.has(prm.Name) {
			continue
		}
		at := root
		if sf, ok := top[prm.Section]; ok && prm.Section != "" {
			if n := resolve(sf.val); !isNull(n) && n.Kind != yaml.MappingNode {
				continue // the section itself is wrong, and reported
			}
			at = sf.key
		}
		l.errorf(at, prm.Path(), "required")
	}
}
