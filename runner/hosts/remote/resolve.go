package remote

// How a host's settings are decided: a field the plan wrote wins, then
// ssh_config (read as ssh reads it, see lookupSSHConfig), then ssh's
// defaults, except the keepalive, whose default is the runner's
// (DefaultKeepaliveInterval: ssh sends none by default, and a run that
// hangs for the minutes TCP takes to give up is worse than one that
// fails). TestSSHConfigAgainstOpenSSH checks the result against ssh -G.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// DefaultKeepaliveInterval and DefaultKeepaliveCountMax apply when neither
// the plan nor ssh_config sets them (ServerAliveInterval,
// ServerAliveCountMax).
const (
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultKeepaliveCountMax = 3
)

// target is one hop after ssh_config and the plan are merged.
type target struct {
	alias string // as the plan or ProxyJump named it (%n)
	host  string // what to connect to
	port  int
	user  string
	// identitySpecs are the identity files as written (ssh -G shows
	// them so); identities are the same, expanded.
	identitySpecs  []string
	identities     []string
	certSpecs      []string // CertificateFile as written
	certificates   []string
	identitiesOnly bool
	proxyJump      string // its own ssh_config ProxyJump; followed for a first hop
	proxyCommand   string // as written; "" or "none" = connect directly
}

func (t target) addr() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// resolved is everything one dial needs.
type resolved struct {
	target
	jumpSpec              string   // the ProxyJump in force, as written ("" = none)
	jumps                 []target // dialling order; the first may have a proxyCommand
	userKnownHosts        []string // the first is where accept-new writes
	globalKnownHosts      []string
	hashKnownHosts        bool
	hostKeyPolicy         string        // strict, accept-new or insecure
	policySource          string        // what decided it, for a refusal's message
	strictHostKeyChecking string        // ssh_config's, as written
	keepalive             time.Duration // 0 = off
	keepaliveMax          int
}

// resolve merges the plan's fields (cfg), ssh_config and the defaults.
func resolve(cfg SSHConfig) (resolved, error) {
	var r resolved
	if cfg.Address == "" {
		return r, errors.New("ssh: no address")
	}
	e, err := lookupSSHConfig(cfg.Address, cfg.User, cfg.ConfigFile)
	if err != nil {
		return r, err
	}
	r.target, err = resolveTarget(cfg.Address, cfg.User, cfg.Port, cfg.IdentityFile, e)
	if err != nil {
		return r, err
	}
	jump := cfg.Jump
	if jump != "" {
		// The plan's jump replaces ssh_config's ProxyJump and ProxyCommand.
		r.proxyCommand = ""
	} else {
		jump = e.ProxyJump
	}
	if jump != "none" {
		r.jumpSpec = jump
	}
	if r.proxyCommand == "none" {
		r.proxyCommand = ""
	}
	r.jumps, err = resolveJumps(jump, cfg.ConfigFile, r.identities, 0)
	if err != nil {
		return r, err
	}

	switch {
	case cfg.KnownHosts != "":
		r.userKnownHosts = []string{expandTilde(cfg.KnownHosts)}
	case e.UserKnownHostsFiles != nil:
		for _, f := range e.UserKnownHostsFiles {
			if f != "none" {
				r.userKnownHosts = append(r.userKnownHosts, expandIdentity(f, r.target, cfg.Address))
			}
		}
	default:
		r.userKnownHosts = []string{expandTilde("~/.ssh/known_hosts"), expandTilde("~/.ssh/known_hosts2")}
	}
	r.globalKnownHosts = DefaultGlobalKnownHosts
	if e.GlobalKnownHostsFiles != nil {
		r.globalKnownHosts = nil
		for _, f := range e.GlobalKnownHostsFiles {
			if f != "none" {
				r.globalKnownHosts = append(r.globalKnownHosts, expandTilde(f))
			}
		}
	}
	if r.hashKnownHosts, err = yesNo("HashKnownHosts", e.HashKnownHosts); err != nil {
		return r, err
	}
	r.strictHostKeyChecking = e.StrictHostKeyChecking
	if r.hostKeyPolicy, r.policySource, err = hostKeyPolicy(cfg, e.StrictHostKeyChecking); err != nil {
		return r, err
	}

	switch {
	case cfg.KeepaliveInterval > 0:
		r.keepalive = cfg.KeepaliveInterval
	case cfg.KeepaliveInterval < 0:
		r.keepalive = 0
	case e.ServerAliveInterval != "":
		d, err := convtime(e.ServerAliveInterval)
		if err != nil {
			return r, fmt.Errorf("ssh_config ServerAliveInterval %q for %s: %w", e.ServerAliveInterval, cfg.Address, err)
		}
		r.keepalive = d
	default:
		r.keepalive = DefaultKeepaliveInterval
	}
	r.keepaliveMax = DefaultKeepaliveCountMax
	if e.ServerAliveCountMax != "" {
		n, err := strconv.Atoi(e.ServerAliveCountMax)
		if err != nil || n < 1 {
			return r, fmt.Errorf("ssh_config ServerAliveCountMax %q for %s: want a whole number of 1 or more", e.ServerAliveCountMax, cfg.Address)
		}
		r.keepaliveMax = n
	}
	return r, nil
}

// Where a host key policy came from (UnknownHostError.Source).
const (
	SourcePlan      = "plan"       // the plan's ssh.host_key_policy
	SourceFlag      = "flag"       // --accept-new-host-keys
	SourceSSHConfig = "ssh_config" // StrictHostKeyChecking
	SourceDefault   = "default"    // none of them: OpenSSH's batch mode
)

// hostKeyPolicy decides the host key policy: the plan's
// ssh.host_key_policy, else --accept-new-host-keys, else ssh_config's
// StrictHostKeyChecking as OpenSSH applies it in batch mode, else strict
// (OpenSSH's default, ask, refuses an unknown host in batch mode). The
// plan wins over the flag because a plan that says strict was written so
// on purpose; --set ssh.host_key_policy=accept-new overrides it.
//
// StrictHostKeyChecking (case aside, as ssh reads it): yes and ask are
// strict (ask cannot ask in batch mode); accept-new is accept-new; no
// (off, false) adds a new host's key as OpenSSH does, but where OpenSSH
// would go on past a changed or revoked key, with password logins and
// forwarding off, the runner refuses it, as it does under every policy
// but insecure. Only insecure, in the plan, turns checking off.
func hostKeyPolicy(cfg SSHConfig, strictHostKeyChecking string) (policy, source string, err error) {
	switch {
	case cfg.HostKeyPolicy != "":
		return cfg.HostKeyPolicy, SourcePlan, nil
	case cfg.AcceptNewHostKeys:
		return PolicyAcceptNew, SourceFlag, nil
	}
	switch strings.ToLower(strictHostKeyChecking) {
	case "":
		return PolicyStrict, SourceDefault, nil
	case "yes", "true", "ask":
		return PolicyStrict, SourceSSHConfig, nil
	case "accept-new", "no", "off", "false":
		return PolicyAcceptNew, SourceSSHConfig, nil
	}
	return "", "", fmt.Errorf("ssh_config StrictHostKeyChecking %q for %s: want yes, accept-new, no, off or ask", strictHostKeyChecking, cfg.Address)
}

// resolveTarget merges the plan's fields over ssh_config's: a field the
// plan wrote wins, one it left out takes ssh_config's, then the default.
func resolveTarget(address, planUser string, planPort int, planIdentity string, e sshConfigEntry) (target, error) {
	t := target{alias: address, host: address, port: 22, user: planUser}
	if e.HostName != "" {
		t.host = e.HostName
	}
	switch {
	case planPort != 0:
		t.port = planPort
	case e.Port != "":
		p, err := strconv.Atoi(e.Port)
		if err != nil || p <= 0 || p > 65535 {
			return t, fmt.Errorf("ssh_config Port %q for %s: not a port", e.Port, address)
		}
		t.port = p
	}
	if t.user == "" {
		t.user = e.User
	}
	if t.user == "" {
		u, err := user.Current()
		if err != nil {
			return t, fmt.Errorf("find the local user name: %w", err)
		}
		t.user = u.Username
	}
	switch {
	case planIdentity != "":
		t.identitySpecs = []string{planIdentity}
	case len(e.IdentityFiles) > 0:
		t.identitySpecs = e.IdentityFiles
	default:
		t.identitySpecs = defaultIdentities
	}
	for _, id := range t.identitySpecs {
		t.identities = append(t.identities, expandIdentity(id, t, address))
	}
	t.certSpecs = e.CertificateFiles
	for _, c := range e.CertificateFiles {
		t.certificates = append(t.certificates, expandIdentity(c, t, address))
	}
	var err error
	if t.identitiesOnly, err = yesNo("IdentitiesOnly", e.IdentitiesOnly); err != nil {
		return t, err
	}
	t.proxyJump = e.ProxyJump
	t.proxyCommand = e.ProxyCommand
	return t, nil
}

// maxJumpDepth bounds how deep first hops' own ProxyJumps are followed,
// so a loop in ssh_config ends in an error rather than forever.
const maxJumpDepth = 8

// resolveJumps turns a ProxyJump value (a comma-separated chain, or
// "none") into hops, in dialling order. As with OpenSSH, the first hop is
// reached by its own ssh_config ProxyJump or ProxyCommand, if it has one;
// the later hops are reached through the hop before them.
func resolveJumps(jump, configFile string, identities []string, depth int) ([]target, error) {
	if jump == "" || jump == "none" {
		return nil, nil
	}
	if depth >= maxJumpDepth {
		return nil, fmt.Errorf("jump host %q: ProxyJump nested more than %d deep; is there a loop in ssh_config?", jump, maxJumpDepth)
	}
	var hops []target
	for i, spec := range strings.Split(jump, ",") {
		h, err := resolveJump(strings.TrimSpace(spec), configFile, identities)
		if err != nil {
			return nil, fmt.Errorf("jump host %q: %w", spec, err)
		}
		if i > 0 {
			h.proxyCommand = "" // reached through the hop before
		}
		hops = append(hops, h)
	}
	before, err := resolveJumps(hops[0].proxyJump, configFile, identities, depth+1)
	if err != nil {
		return nil, err
	}
	return append(before, hops...), nil
}

// resolveJump parses one ProxyJump hop, "[user@]host[:port]", looking the
// host up in ssh_config (resolveJumps follows its own ProxyJump). A hop
// with no identity file of its own uses the target's.
func resolveJump(spec, configFile string, identities []string) (target, error) {
	u, hp, ok := strings.Cut(spec, "@")
	if !ok {
		hp, u = u, ""
	}
	host, port := hp, 0
	if h, p, err := net.SplitHostPort(hp); err == nil {
		host = h
		n, err := strconv.Atoi(p)
		if err != nil {
			return target{}, fmt.Errorf("port %q: not a number", p)
		}
		port = n
	}
	if host == "" {
		return target{}, errors.New("no host")
	}
	e, err := lookupSSHConfig(host, u, configFile)
	if err != nil {
		return target{}, err
	}
	t, err := resolveTarget(host, u, port, "", e)
	if err != nil {
		return target{}, err
	}
	if len(e.IdentityFiles) == 0 {
		t.identities = identities
	}
	return t, nil
}

func yesNo(keyword, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "no":
		return false, nil
	case "yes":
		return true, nil
	}
	return false, fmt.Errorf("ssh_config %s %q: want yes or no", keyword, v)
}

// convtime parses an ssh_config time: seconds, or a sequence of numbers
// with s, m, h, d or w, as sshd_config(5) TIME FORMATS.
func convtime(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	var total time.Duration
	num := ""
	for _, r := range strings.ToLower(s) {
		if r >= '0' && r <= '9' {
			num += string(r)
			continue
		}
		unit := map[rune]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[r]
		n, err := strconv.Atoi(num)
		if unit == 0 || err != nil {
			return 0, errors.New("not a time (e.g. 30 or 1m30s)")
		}
		total += time.Duration(n) * unit
		num = ""
	}
	if num != "" {
		n, _ := strconv.Atoi(num)
		total += time.Duration(n) * time.Second
	}
	return total, nil
}

// envShell is the shell ProxyCommand runs under, as ssh: $SHELL, else sh.
func envShell() string {
	if sh := os.Getenv("SHELL"); sh != "" {
		return sh
	}
	return "/bin/sh"
}
