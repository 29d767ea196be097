package remote_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
)

// TestProxyCommandUnsafeName: a name that would reach a ProxyCommand's
// shell line holding shell syntax is refused before any shell runs,
// whether it came as ssh_config's HostName or User or as the address a
// caller passed without the plan loader's check (issue 31), or as the
// alias behind a clean HostName (%n is the alias, issue 42). The payload
// would create a marker file; it must not exist afterwards. A name the
// command does not use does not stop it.
func TestProxyCommandUnsafeName(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := t.TempDir()
	key := newKey(t, "")
	// Each case's payload touches its own marker, written as MARKER.
	const payload = "$(touch${IFS}MARKER)"
	for _, c := range []struct {
		name, address, config, token, char string
	}{
		{"HostName", "lab", "Host lab\n  HostName h" + payload + "\n  ProxyCommand false %h %p\n", "%h", "'$' at byte 2"},
		{"User", "lab", "Host lab\n  User u" + payload + "\n  ProxyCommand false %h %p %r\n", "%r", "'(' at byte 3"},
		{"alias", "a" + payload, "Host *\n  ProxyCommand false %n %p\n", "%n", "'$' at byte 2"},
		// %n is the alias even where a clean HostName stands in for it.
		{"alias behind a clean HostName", "a" + payload, "Host *\n  HostName clean.example\n  ProxyCommand false %n %p\n", "%n", "'$' at byte 2"},
		{"jump host", "lab", "Host lab\n  ProxyJump hop\nHost hop\n  HostName j" + payload + "\n  ProxyCommand false %h %p\n", "%h", "'$' at byte 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "marker")
			cfgFile := filepath.Join(t.TempDir(), "config")
			os.WriteFile(cfgFile, []byte(strings.ReplaceAll(c.config, "MARKER", marker)), 0o600)
			err := dialErr(t, remote.SSHConfig{Address: strings.ReplaceAll(c.address, "MARKER", marker), IdentityFile: key, HostKeyPolicy: "strict",
				KnownHosts: filepath.Join(t.TempDir(), "known_hosts"), ConfigFile: cfgFile, ConnectTimeout: 5 * time.Second})
			var ue *remote.UnsafeNameError
			if !errors.As(err, &ue) || !errors.Is(err, remote.ErrUnsafeName) || ue.Token != c.token {
				t.Errorf("dial: %v; want an UnsafeNameError for %s", err, c.token)
			} else if want := fmt.Sprintf("its %s, the ", c.token); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.char) {
				t.Errorf("dial: %v; want it to say %q and %q", err, want, c.char)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("the name's payload ran: %s exists", marker)
			}
		})
	}
	// A literal User from ssh_config that the command never sees: the
	// ProxyCommand runs (and fails, being false), as OpenSSH would run it.
	cfgFile := filepath.Join(dir, "config")
	os.WriteFile(cfgFile, []byte("Host lab\n  User u(x)\n  ProxyCommand echo ran >&2; false %h %p\n"), 0o600)
	err := dialErr(t, remote.SSHConfig{Address: "lab", IdentityFile: key, HostKeyPolicy: "strict",
		KnownHosts: filepath.Join(dir, "known_hosts"), ConfigFile: cfgFile, ConnectTimeout: 5 * time.Second})
	if errors.Is(err, remote.ErrUnsafeName) || !strings.Contains(err.Error(), "ran") {
		t.Errorf("a ProxyCommand without %%r, user u(x): %v; want it run", err)
	}
}
