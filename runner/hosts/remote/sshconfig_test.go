package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLookupSSHConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := t.TempDir()
	// A relative Include is taken from ~/.ssh, as ssh does, not from the
	// including file's directory: the copy beside it must not be read.
	os.Mkdir(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "extra.conf"), []byte("Host lab-*\n  User included\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "extra.conf"), []byte("Host lab-*\n  User wrong-dir\n"), 0o600)
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
			IdentityFiles: []string{"~/.ssh/lab", "/keys/second", "/keys/default"}, ProxyJump: "gw"}},
		// Negation excludes lab-3 from the second block only.
		{"lab-3", sshConfigEntry{User: "included", IdentityFiles: []string{"/keys/default"}}},
		{"other", sshConfigEntry{User: "fallback", IdentityFiles: []string{"/keys/default"}}},
	} {
		got, err := lookupSSHConfig(c.alias, "", cfg)
		got.alias, got.planUser, got.proxySet = "", "", false
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
	want := target{alias: "alias", host: "10.0.0.1", port: 2200, user: "cfguser", identitySpecs: []string{"/cfg/key"}, identities: []string{"/cfg/key"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("unwritten plan fields: %+v, %v; want %+v", got, err, want)
	}
	// Writing the default value (port 22) is not the same as leaving it out.
	got, err = resolveTarget("alias", "planuser", 22, "/plan/key", e)
	want = target{alias: "alias", host: "10.0.0.1", port: 22, user: "planuser", identitySpecs: []string{"/plan/key"}, identities: []string{"/plan/key"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("written plan fields: %+v, %v; want %+v", got, err, want)
	}
}

func TestSSHConfigMatch(t *testing.T) {
	local := localUserName()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`Host gpu-*
  HostName %h.cluster.example
Match host *.cluster.example user alice
  Port 2201
Match originalhost gpu-2 !user bob
  ProxyJump gw
Match localuser `+local+` host gpu-*,!gpu-9.cluster.example
  IdentityFile ~/.ssh/%r@%h-%p
Match exec "test %n = login"
  User from-exec
Match canonical
  User from-canonical
Match final all
  User from-final
`), 0o600)
	for _, c := range []struct {
		alias, planUser string
		want            sshConfigEntry
	}{
		// host sees the HostName set before it; user sees the plan's user.
		{"gpu-1", "alice", sshConfigEntry{HostName: "gpu-1.cluster.example", Port: "2201",
			IdentityFiles: []string{"~/.ssh/%r@%h-%p"}, User: "from-final"}},
		{"gpu-2", "", sshConfigEntry{HostName: "gpu-2.cluster.example", ProxyJump: "gw",
			IdentityFiles: []string{"~/.ssh/%r@%h-%p"}, User: "from-final"}},
		{"gpu-2", "bob", sshConfigEntry{HostName: "gpu-2.cluster.example",
			IdentityFiles: []string{"~/.ssh/%r@%h-%p"}, User: "from-final"}},
		{"gpu-9", "alice", sshConfigEntry{HostName: "gpu-9.cluster.example", Port: "2201", User: "from-final"}},
		// exec runs, with the alias for %n.
		{"login", "", sshConfigEntry{User: "from-exec"}},
		// A name a shell would read more into is not handed to one.
		{"login$(touch " + filepath.Join(dir, "ran") + ")", "", sshConfigEntry{User: "from-final"}},
	} {
		got, err := lookupSSHConfig(c.alias, c.planUser, cfg)
		got.alias, got.planUser, got.proxySet = "", "", false
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("lookup %s (plan user %q) = %+v, %v\nwant %+v", c.alias, c.planUser, got, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Errorf("a shell ran what an alias held")
	}
}

func TestIdentityFileTokens(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	e := sshConfigEntry{HostName: "10.0.0.1", User: "alice", Port: "2200",
		IdentityFiles: []string{"~/.ssh/%r@%h:%p", "%d/keys/%n_%%", "/k/%u-%i", "/k/%x"}}
	got, err := resolveTarget("lab", "", 0, "", e)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{home + "/.ssh/alice@10.0.0.1:2200", home + "/keys/lab_%",
		"/k/" + localUserName() + "-" + strconv.Itoa(os.Getuid()), "/k/%x"}
	if !reflect.DeepEqual(got.identities, want) {
		t.Errorf("identities = %q\nwant %q", got.identities, want)
	}
	if got := expandTokens("%h%", map[byte]string{'h': "x"}); got != "x%" {
		t.Errorf("expandTokens with a trailing %% = %q", got)
	}
}

// A first hop's own ProxyJump is followed, as OpenSSH does; later hops
// are reached through the hop before them, and a loop is an error.
func TestJumpChain(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg, []byte(`Host inner
  HostName 10.0.2.1
  ProxyJump mid
Host mid
  HostName 10.0.1.1
  ProxyJump outer
Host outer
  HostName 10.0.0.1
  User gate
Host later
  ProxyJump ignored-because-not-first
Host loop-a
  ProxyJump loop-b
Host loop-b
  ProxyJump loop-a
`), 0o600)
	hops, err := resolveJumps("inner,later", cfg, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range hops {
		got = append(got, h.user+"@"+h.addr())
	}
	local := localUserName()
	want := []string{"gate@10.0.0.1:22", local + "@10.0.1.1:22", local + "@10.0.2.1:22", local + "@later:22"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hops = %q\nwant %q", got, want)
	}
	if _, err := resolveJumps("loop-a", cfg, nil, 0); err == nil || !strings.Contains(err.Error(), "is there a loop in ssh_config?") {
		t.Errorf("a ProxyJump loop gave %v", err)
	}
	if hops, err := resolveJumps("none", cfg, nil, 0); err != nil || len(hops) != 0 {
		t.Errorf("ProxyJump none = %v, %v", hops, err)
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

// TestPrecedence: a plan field wins over ssh_config, which wins over the
// defaults; the plan's known_hosts replaces the user files, never the
// global ones.
func TestPrecedence(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg, []byte(`Host lab
  ServerAliveInterval 60
  ServerAliveCountMax 5
  UserKnownHostsFile ~/cfg_known_hosts
  GlobalKnownHostsFile /etc/ssh/site_known_hosts
  ProxyCommand ssh -W %h:%p login
`), 0o600)
	r, err := resolve(SSHConfig{Address: "lab", ConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if r.keepalive != time.Minute || r.keepaliveMax != 5 || !reflect.DeepEqual(r.userKnownHosts, []string{home + "/cfg_known_hosts"}) ||
		r.proxyCommand == "" {
		t.Errorf("ssh_config over the defaults: keepalive %v × %d, user files %q, proxy %q", r.keepalive, r.keepaliveMax, r.userKnownHosts, r.proxyCommand)
	}
	r, err = resolve(SSHConfig{Address: "lab", ConfigFile: cfg, KeepaliveInterval: 5 * time.Second, KnownHosts: "~/plan_known_hosts", Jump: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if r.keepalive != 5*time.Second || r.keepaliveMax != 5 || !reflect.DeepEqual(r.userKnownHosts, []string{home + "/plan_known_hosts"}) ||
		!reflect.DeepEqual(r.globalKnownHosts, []string{"/etc/ssh/site_known_hosts"}) || r.proxyCommand != "" || r.jumpSpec != "gw" {
		t.Errorf("the plan over ssh_config: keepalive %v × %d, user files %q, global %q, proxy %q, jump %q",
			r.keepalive, r.keepaliveMax, r.userKnownHosts, r.globalKnownHosts, r.proxyCommand, r.jumpSpec)
	}
	r, err = resolve(SSHConfig{Address: "other", ConfigFile: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if r.keepalive != DefaultKeepaliveInterval || r.keepaliveMax != DefaultKeepaliveCountMax ||
		!reflect.DeepEqual(r.globalKnownHosts, DefaultGlobalKnownHosts) || len(r.userKnownHosts) != 2 {
		t.Errorf("defaults: keepalive %v × %d, user %q, global %q", r.keepalive, r.keepaliveMax, r.userKnownHosts, r.globalKnownHosts)
	}
	if r, err := resolve(SSHConfig{Address: "lab", KeepaliveInterval: -1, ConfigFile: cfg}); err != nil || r.keepalive != 0 {
		t.Errorf("KeepaliveInterval < 0: keepalive %v, %v; want none", r.keepalive, err)
	}
}
