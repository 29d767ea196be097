package remote

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// sshConfigEntry is what an ssh_config file says about one host alias.
// Only the keywords the runner honours are kept; the rest are ignored.
type sshConfigEntry struct {
	HostName      string
	User          string
	Port          string
	IdentityFiles []string
	ProxyJump     string

	alias, planUser string // what Match host, originalhost and user see
}

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

// lookupSSHConfig reads configFile ("" = ~/.ssh/config; a missing file is
// an empty config) and returns the settings for alias as OpenSSH would:
// the first value obtained for a keyword wins, IdentityFile accumulates,
// and Host patterns may use * and ? and negation with !. Include is
// followed. Match blocks are evaluated as in matchBlock. planUser is the
// user the plan wrote ("" when none), which Match user sees first.
// IdentityFile values keep their %-tokens: expandTokens needs the final
// host, user and port.
func lookupSSHConfig(alias, planUser, configFile string) (sshConfigEntry, error) {
	e := sshConfigEntry{alias: alias, planUser: planUser}
	path := configFile
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return e, nil
		}
		path = filepath.Join(home, ".ssh", "config")
	}
	seen := map[string]bool{}
	if err := readSSHConfig(path, alias, &e, seen, 0, true); err != nil {
		return e, err
	}
	return e, nil
}

func readSSHConfig(path, alias string, e *sshConfigEntry, seen map[string]bool, depth int, top bool) error {
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
		val = unquote(val)
		switch key {
		case "include":
			for _, pat := range strings.Fields(val) {
				pat = expandTilde(pat)
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(path), pat)
				}
				matches, _ := filepath.Glob(pat)
				for _, m := range matches {
					if seen[m] {
						continue
					}
					seen[m] = true
					if err := readSSHConfig(m, alias, e, seen, depth+1, false); err != nil {
						return err
					}
				}
			}
		case "hostname":
			if e.HostName == "" {
				e.HostName = expandTokens(val, map[byte]string{'h': alias})
			}
		case "user":
			if e.User == "" {
				e.User = val
			}
		case "port":
			if e.Port == "" {
				e.Port = val
			}
		case "identityfile":
			e.IdentityFiles = append(e.IdentityFiles, val)
		case "proxyjump":
			if e.ProxyJump == "" {
				e.ProxyJump = val
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read ssh config %s:%d: %w", path, line, err)
	}
	return nil
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
		ok, _ := filepath.Match(p, alias)
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
// User found so far, else the local user), localuser, and final (true:
// there is only one pass). canonical never holds (no canonicalisation),
// and exec is not run: a block whose command we will not run is safer
// skipped than applied. Each criterion may be negated with "!", and takes
// a comma-separated pattern list that may itself use "!".
func matchBlock(e *sshConfigEntry, line string) bool {
	args := strings.Fields(line)
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
				return false
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
	p = expandTilde(p)
	vals := map[byte]string{'h': t.host, 'n': alias, 'p': strconv.Itoa(t.port), 'r': t.user,
		'i': strconv.Itoa(os.Getuid()), 'u': localUserName()}
	if home, err := os.UserHomeDir(); err == nil {
		vals['d'] = home
	}
	if h, err := os.Hostname(); err == nil {
		vals['l'] = h
		vals['L'], _, _ = strings.Cut(h, ".")
	}
	return expandTokens(p, vals)
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
