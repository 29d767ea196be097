package remote

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"rdmasweep/internal/sshname"
)

// sshConfigEntry is what ssh_config says about one host alias. Only the
// keywords the runner honours are kept (docs/ssh.md has the table); the
// rest are ignored. Values keep their %-tokens; "" means not set.
type sshConfigEntry struct {
	HostName      string
	User          string
	Port          string
	IdentityFiles []string
	// ProxyJump and ProxyCommand compete: whichever comes first wins,
	// "none" included, and the other is then ignored (ssh_config(5)).
	ProxyJump        string
	ProxyCommand     string
	CertificateFiles []string
	IdentitiesOnly   string // "yes", "no" or ""
	HashKnownHosts   string
	// UserKnownHostsFiles and GlobalKnownHostsFiles are nil when not set.
	UserKnownHostsFiles   []string
	GlobalKnownHostsFiles []string
	ServerAliveInterval   string
	ServerAliveCountMax   string
	StrictHostKeyChecking string

	alias, planUser string // what Match host, originalhost and user see
	proxySet        bool   // ProxyJump or ProxyCommand was seen
}

// SystemSSHConfig is the system-wide ssh_config, read after the user's as
// ssh reads it (unless a config file is named, as with ssh -F).
const SystemSSHConfig = "/etc/ssh/ssh_config"

// ResolveHostName returns the HostName that the ssh_config file
// (configFile, or ~/.ssh/config when "") gives the alias address, or
// address itself when there is none or the file can't be read.
func ResolveHostName(address, configFile string) string {
	e, err := lookupSSHConfig(address, "", configFile)
	if err != nil || e.HostName == "" {
		return address
	}
	return e.HostName
}

// lookupSSHConfig returns the settings for alias as ssh would: from
// configFile alone when it is set (as ssh -F), else from ~/.ssh/config and
// then SystemSSHConfig. The first value obtained for a keyword wins,
// IdentityFile and CertificateFile accumulate, and Host patterns may use
// * and ? and negation with !. Include is followed: a relative path is
// taken from ~/.ssh in a user file and from /etc/ssh in the system file,
// whatever directory the including file is in. Match blocks are evaluated
// as in matchBlock. planUser is the user the plan wrote ("" when none),
// which Match user sees first. A missing file is an empty one.
func lookupSSHConfig(alias, planUser, configFile string) (sshConfigEntry, error) {
	e := sshConfigEntry{alias: alias, planUser: planUser}
	home, _ := os.UserHomeDir()
	userDir := filepath.Join(home, ".ssh")
	type file struct{ path, includeDir string }
	var files []file
	if configFile != "" {
		files = []file{{expandTilde(configFile), userDir}}
	} else {
		if home != "" {
			files = append(files, file{filepath.Join(userDir, "config"), userDir})
		}
		files = append(files, file{SystemSSHConfig, filepath.Dir(SystemSSHConfig)})
	}
	for _, f := range files {
		if err := readSSHConfig(f.path, f.includeDir, alias, &e, map[string]bool{}, 0); err != nil {
			return e, err
		}
	}
	return e, nil
}

func readSSHConfig(path, includeDir, alias string, e *sshConfigEntry, seen map[string]bool, depth int) error {
	if depth > 16 {
		return fmt.Errorf("%s: include nested too deeply", path)
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ssh config: %w", err)
	}
	defer f.Close()
	active := true
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		key, val, ok := splitConfigLine(sc.Text())
		if !ok {
			continue
		}
		switch key {
		case "host":
			active = hostMatches(alias, strings.Fields(val))
			continue
		case "match":
			active = matchBlock(e, val)
			continue
		}
		if !active {
			continue
		}
		if key != "include" {
			e.set(key, unquote(val), configArgs(val), alias)
			continue
		}
		if err := includeSSHConfig(configArgs(val), includeDir, alias, e, seen, depth); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read ssh config %s:%d: %w", path, line, err)
	}
	return nil
}

// includeSSHConfig reads the files an Include line's patterns name, each
// once, relative ones under includeDir.
func includeSSHConfig(patterns []string, includeDir, alias string, e *sshConfigEntry, seen map[string]bool, depth int) error {
	for _, pat := range patterns {
		pat = expandTilde(pat)
		if !filepath.IsAbs(pat) {
			pat = filepath.Join(includeDir, pat)
		}
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if seen[m] {
				continue
			}
			seen[m] = true
			if err := readSSHConfig(m, includeDir, alias, e, seen, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// set records one keyword of an active block, val unquoted and args its
// words; as ssh, the first value of a keyword wins (IdentityFile and
// CertificateFile add up). Keywords the runner does not honour are
// ignored.
func (e *sshConfigEntry) set(key, val string, args []string, alias string) {
	first := func(dst *string) {
		if *dst == "" && len(args) > 0 {
			*dst = args[0]
		}
	}
	switch key {
	case "hostname":
		if e.HostName == "" && len(args) > 0 {
			e.HostName = expandTokens(args[0], map[byte]string{'h': alias})
		}
	case "user":
		first(&e.User)
	case "port":
		first(&e.Port)
	case "identityfile":
		e.IdentityFiles = append(e.IdentityFiles, args...)
	case "certificatefile":
		e.CertificateFiles = append(e.CertificateFiles, args...)
	case "proxyjump":
		if !e.proxySet {
			e.proxySet = true
			e.ProxyJump = val
		}
	case "proxycommand":
		// The rest of the line, as written, is the command.
		if !e.proxySet {
			e.proxySet = true
			e.ProxyCommand = val
		}
	case "identitiesonly":
		first(&e.IdentitiesOnly)
	case "hashknownhosts":
		first(&e.HashKnownHosts)
	case "userknownhostsfile":
		if e.UserKnownHostsFiles == nil {
			e.UserKnownHostsFiles = append([]string{}, args...)
		}
	case "globalknownhostsfile":
		if e.GlobalKnownHostsFiles == nil {
			e.GlobalKnownHostsFiles = append([]string{}, args...)
		}
	case "serveraliveinterval":
		first(&e.ServerAliveInterval)
	case "serveralivecountmax":
		first(&e.ServerAliveCountMax)
	case "stricthostkeychecking":
		first(&e.StrictHostKeyChecking)
	}
}

// configArgs splits a value into words as ssh does: on white space,
// with double quotes grouping.
func configArgs(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case (r == ' ' || r == '\t') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// splitConfigLine splits "Keyword value" or "Keyword=value"; the keyword
// is lowercased. Blank lines and comments give ok=false.
func splitConfigLine(s string) (key, val string, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '#' {
		return "", "", false
	}
	i := strings.IndexAny(s, " \t=")
	if i < 0 {
		return strings.ToLower(s), "", true
	}
	key = strings.ToLower(s[:i])
	val = strings.TrimLeft(s[i:], " \t")
	val = strings.TrimPrefix(val, "=")
	return key, strings.TrimSpace(val), true
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// hostMatches applies a Host line: any positive pattern must match and no
// negated one may.
func hostMatches(alias string, patterns []string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		ok := sshPattern(p, alias)
		if ok && neg {
			return false
		}
		if ok {
			matched = true
		}
	}
	return matched
}

// matchBlock evaluates a Match line as OpenSSH does in its final pass:
// every criterion must hold. Supported: all, host (the HostName found so
// far, else the alias), originalhost, user (the plan's user, else the
// User found so far, else the local user), localuser, exec (matchExec),
// and final (true: there is only one pass). canonical never holds (no
// canonicalisation). Each criterion may be negated with "!", and takes a
// comma-separated pattern list that may itself use "!". Criteria are
// taken in order and the first that fails ends the line, so an exec after
// it is not run, as in ssh.
func matchBlock(e *sshConfigEntry, line string) bool {
	args := configArgs(line)
	if len(args) == 0 {
		return false
	}
	for i := 0; i < len(args); i++ {
		crit := strings.ToLower(args[i])
		neg := strings.HasPrefix(crit, "!")
		crit = strings.TrimPrefix(crit, "!")
		var ok bool
		switch crit {
		case "all":
			ok = true
		case "final":
			ok = true
		case "canonical":
			ok = false
		case "host", "originalhost", "user", "localuser", "exec":
			if i+1 >= len(args) {
				return false // OpenSSH rejects a criterion with no argument
			}
			i++
			arg := unquote(args[i])
			switch crit {
			case "host":
				ok = matchList(firstOf(e.HostName, e.alias), arg)
			case "originalhost":
				ok = matchList(e.alias, arg)
			case "user":
				ok = matchList(firstOf(e.planUser, e.User, localUserName()), arg)
			case "localuser":
				ok = matchList(localUserName(), arg)
			case "exec":
				ok = matchExec(e, arg)
			}
		default:
			return false // unknown criterion: OpenSSH would refuse the file
		}
		if ok == neg {
			return false
		}
	}
	return true
}

// matchExec runs a Match exec command as ssh does: its %-tokens expanded
// with what is known so far, through the user's $SHELL (else /bin/sh)
// with -c, stdin and stdout on /dev/null and stderr the runner's; it
// matches when the command exits 0. Tokens: %h the HostName so far (else
// the alias), %n the alias, %p the Port so far (else 22), %r the remote
// user as Match user sees it, %u the local user, %d home, %l and %L the
// local host name and its first label, %i the uid, %k the host (no
// HostKeyAlias is read), %C the SHA-1 of %l%h%p%r.
func matchExec(e *sshConfigEntry, cmd string) bool {
	host, port := firstOf(e.HostName, e.alias), firstOf(e.Port, "22")
	ruser := firstOf(e.planUser, e.User, localUserName())
	// As OpenSSH 9.6 and later: a name from the plan is not handed to a
	// shell when a shell would read more into it than a name.
	for _, c := range []struct {
		name string
		rule func(string) error
	}{{e.alias, sshname.Host}, {ruser, sshname.User}} {
		if err := c.rule(c.name); err != nil {
			fmt.Fprintf(os.Stderr, "runner: ssh_config: Match exec not run for %q: it holds what a shell would interpret: %v\n", c.name, err)
			return false
		}
	}
	vals := tokenValues(host, e.alias, port, ruser)
	vals['k'] = host
	sum := sha1.Sum([]byte(vals['l'] + host + port + ruser))
	vals['C'] = hex.EncodeToString(sum[:])
	shell := os.Getenv("SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	c := exec.Command(shell, "-c", expandTokens(cmd, vals))
	c.Stderr = os.Stderr
	return c.Run() == nil
}

// matchList applies a comma-separated pattern list: some positive pattern
// must match and no negated one may.
func matchList(s, list string) bool {
	return hostMatches(s, strings.Split(list, ","))
}

func firstOf(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

func localUserName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// expandTokens replaces ssh_config %-tokens: %% and those in vals. Others
// are left as written, so a path that needs one we lack fails visibly.
func expandTokens(s string, vals map[byte]string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
		} else if v, ok := vals[s[i]]; ok {
			b.WriteString(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// expandIdentity gives an IdentityFile its final path: ~ for the home
// directory, and the tokens OpenSSH expands there (%d home, %h host name,
// %i uid, %l local host name, %L its first label, %n the alias as given,
// %p port, %r remote user, %u local user).
func expandIdentity(p string, t target, alias string) string {
	return expandTokens(expandTilde(p), tokenValues(t.host, alias, strconv.Itoa(t.port), t.user))
}

// tokenValues are the %-tokens ssh expands in paths and commands: %h
// host, %n alias, %p port, %r remote user, %i uid, %u local user, %d
// home, %l local host name, %L its first label.
func tokenValues(host, alias, port, ruser string) map[byte]string {
	vals := map[byte]string{'h': host, 'n': alias, 'p': port, 'r': ruser,
		'i': strconv.Itoa(os.Getuid()), 'u': localUserName()}
	if home, err := os.UserHomeDir(); err == nil {
		vals['d'] = home
	}
	if h, err := os.Hostname(); err == nil {
		vals['l'] = h
		vals['L'], _, _ = strings.Cut(h, ".")
	}
	return vals
}

// expandTilde expands a leading ~ to the home directory.
func expandTilde(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}
