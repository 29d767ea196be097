package remote

import (
	"bufio"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
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
}

// ResolveHostName returns the HostName that the ssh_config file
// (configFile, or ~/.ssh/config when "") gives the alias address, or
// address itself when there is none or the file can't be read.
func ResolveHostName(address, configFile string) string {
	e, err := lookupSSHConfig(address, configFile)
	if err != nil || e.HostName == "" {
		return address
	}
	return e.HostName
}

// lookupSSHConfig reads configFile ("" = ~/.ssh/config; a missing file is
// an empty config) and returns the settings for alias as OpenSSH would:
// the first value obtained for a keyword wins, IdentityFile accumulates,
// and Host patterns may use * and ? and negation with !. Match blocks are
// not evaluated (treated as not matching). Include is followed.
func lookupSSHConfig(alias, configFile string) (sshConfigEntry, error) {
	var e sshConfigEntry
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
			// Match criteria (exec, canonical, ...) are not evaluated; a
			// block we can't judge is safer skipped than applied.
			active = false
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
				e.HostName = strings.ReplaceAll(val, "%h", alias)
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
			e.IdentityFiles = append(e.IdentityFiles, expandTilde(val))
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

func expandTilde(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	if strings.Contains(p, "%d") {
		if home, err := os.UserHomeDir(); err == nil {
			p = strings.ReplaceAll(p, "%d", home)
		}
	}
	if strings.Contains(p, "%u") {
		if u, err := user.Current(); err == nil {
			p = strings.ReplaceAll(p, "%u", u.Username)
		}
	}
	return p
}
