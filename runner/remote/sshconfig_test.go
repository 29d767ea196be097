package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLookupSSHConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "extra.conf"), []byte("Host lab-*\n  User included\n"), 0o600)
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`# comment
Include extra.conf
Host lab-1 lab-2
  HostName=10.1.0.%h
  Port 2222
  IdentityFile ~/.ssh/lab
  IdentityFile "/keys/second"
Host lab-* !lab-3
  User alice
  ProxyJump gw
  Port 22
Match exec "false"
  User matched
Host *
  User fallback
  IdentityFile /keys/default
`), 0o600)

	for _, c := range []struct {
		alias string
		want  sshConfigEntry
	}{
		// First value wins; IdentityFile accumulates; Include is read
		// where it stands.
		{"lab-1", sshConfigEntry{HostName: "10.1.0.lab-1", User: "included", Port: "2222",
			IdentityFiles: []string{filepath.Join(home, ".ssh/lab"), "/keys/second", "/keys/default"}, ProxyJump: "gw"}},
		// Negation excludes lab-3 from the second block only.
		{"lab-3", sshConfigEntry{User: "included", IdentityFiles: []string{"/keys/default"}}},
		{"other", sshConfigEntry{User: "fallback", IdentityFiles: []string{"/keys/default"}}},
	} {
		got, err := lookupSSHConfig(c.alias, cfg)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("lookup %s = %+v, %v\nwant %+v", c.alias, got, err, c.want)
		}
	}
	if got := ResolveHostName("lab-2", cfg); got != "10.1.0.lab-2" {
		t.Errorf("ResolveHostName(lab-2) = %q", got)
	}
	if got := ResolveHostName("lab-2", filepath.Join(dir, "missing")); got != "lab-2" {
		t.Errorf("ResolveHostName with no config file = %q", got)
	}
}

func TestResolveTargetPlanWins(t *testing.T) {
	e := sshConfigEntry{HostName: "10.0.0.1", User: "cfguser", Port: "2200", IdentityFiles: []string{"/cfg/key"}}
	got, err := resolveTarget("alias", "", 0, "", e)
	want := target{host: "10.0.0.1", port: 2200, user: "cfguser", identities: []string{"/cfg/key"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("unwritten plan fields: %+v, %v; want %+v", got, err, want)
	}
	// Writing the default value (port 22) is not the same as leaving it out.
	got, err = resolveTarget("alias", "planuser", 22, "/plan/key", e)
	want = target{host: "10.0.0.1", port: 22, user: "planuser", identities: []string{"/plan/key"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("written plan fields: %+v, %v; want %+v", got, err, want)
	}
}

// TestShellCommand runs the quoted command through a real sh and checks
// every argument arrives unchanged.
func TestShellCommand(t *testing.T) {
	args := []string{"/usr/bin/printf", `%s\n`, "plain", "with space", `it's`, `"dq"`, "$HOME", "`id`", "a;b", "", "*", "\\", "new\nline"}
	out, err := exec.Command("sh", "-c", ShellCommand(args)).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", ShellCommand(args), err)
	}
	want := ""
	for _, a := range args[2:] {
		want += a + "\n"
	}
	if string(out) != want {
		t.Errorf("sh -c %q printed %q, want %q", ShellCommand(args), out, want)
	}
}
