package remote

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/testbed/testenv"
)

// sshG runs `ssh -G` (with -F file when file is not "") for alias under
// home, and returns its keywords: each value as a list (IdentityFile and
// CertificateFile give one line each; the known-hosts files one line of
// several words).
func sshG(t *testing.T, home, file, alias string) map[string][]string {
	t.Helper()
	args := []string{"-G"}
	if file != "" {
		args = append(args, "-F", file)
	}
	cmd := exec.Command("ssh", append(args, alias)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh %s: %v", strings.Join(append(args, alias), " "), err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch k {
		case "identityfile", "certificatefile":
			m[k] = append(m[k], v)
		default:
			m[k] = strings.Fields(v)
		}
	}
	return m
}

// oracleView is what the oracle compares, in ssh -G's terms.
type oracleView struct {
	Hostname, User, Port       string
	IdentityFile               []string
	CertificateFile            []string
	ProxyJump, ProxyCommand    string
	UserKnownHostsFile         []string
	GlobalKnownHostsFile       []string
	ServerAliveInterval        string
	ServerAliveCountMax        string
	IdentitiesOnly, HashKnownH string
}

func fromSSHG(m map[string][]string) oracleView {
	one := func(k string) string { return strings.Join(m[k], " ") }
	v := oracleView{Hostname: one("hostname"), User: one("user"), Port: one("port"),
		IdentityFile: m["identityfile"], CertificateFile: m["certificatefile"],
		ProxyJump: one("proxyjump"), ProxyCommand: one("proxycommand"),
		UserKnownHostsFile: m["userknownhostsfile"], GlobalKnownHostsFile: m["globalknownhostsfile"],
		ServerAliveInterval: one("serveraliveinterval"), ServerAliveCountMax: one("serveralivecountmax"),
		IdentitiesOnly: one("identitiesonly"), HashKnownH: one("hashknownhosts")}
	if v.ProxyJump == "none" {
		v.ProxyJump = ""
	}
	if v.ProxyCommand == "none" {
		v.ProxyCommand = ""
	}
	if len(v.UserKnownHostsFile) == 1 && v.UserKnownHostsFile[0] == "none" {
		v.UserKnownHostsFile = nil
	}
	if len(v.GlobalKnownHostsFile) == 1 && v.GlobalKnownHostsFile[0] == "none" {
		v.GlobalKnownHostsFile = nil
	}
	return v
}

// fromResolved is the runner's resolution in the same terms. The
// keepalive differs by design where ssh_config is silent: ssh sends none
// (-G says 0), the runner DefaultKeepaliveInterval; set says which.
func fromResolved(t *testing.T, cfg SSHConfig) (oracleView, bool) {
	t.Helper()
	r, err := resolve(cfg)
	if err != nil {
		t.Fatalf("resolve %s: %v", cfg.Address, err)
	}
	e, _ := lookupSSHConfig(cfg.Address, cfg.User, cfg.ConfigFile)
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	v := oracleView{Hostname: r.host, User: r.user, Port: strconv.Itoa(r.port),
		IdentityFile: r.identitySpecs, CertificateFile: r.certSpecs,
		ProxyJump: r.jumpSpec, ProxyCommand: r.proxyCommand,
		UserKnownHostsFile: r.userKnownHosts, GlobalKnownHostsFile: r.globalKnownHosts,
		ServerAliveInterval: strconv.Itoa(int(r.keepalive / time.Second)), ServerAliveCountMax: strconv.Itoa(r.keepaliveMax),
		IdentitiesOnly: yn(r.identitiesOnly), HashKnownH: yn(r.hashKnownHosts)}
	return v, e.ServerAliveInterval != ""
}

// oracleConfigs are ssh_config files and the alias looked up in each.
// Each exercises one rule ssh(1) follows; ssh -G is the judge.
var oracleConfigs = []struct{ name, alias, config string }{
	{"plain alias", "lab", "Host lab\n  HostName 10.9.0.1\n  User alice\n  Port 2201\n"},
	{"no match: defaults", "elsewhere", "Host lab\n  User alice\n"},
	{"first value wins", "lab", "Host lab\n  User first\nHost *\n  User second\n  Port 2202\n"},
	{"equals and quotes", "lab", "Host=lab\n  HostName=\"10.9.0.2\"\n  User = bob\n  IdentityFile \"~/.ssh/with space\"\n"},
	{"keywords any case", "lab", "HOST lab\n  hostname 10.9.0.3\n  uSeR carol\n  PORT 2203\n"},
	{"wildcards and negation", "gpu-7", "Host gpu-? !gpu-9\n  User gpus\nHost gpu-*\n  User fallback\n  HostName %h.cluster.example\n"},
	{"negated host excluded", "gpu-9", "Host gpu-? !gpu-9\n  User gpus\nHost gpu-*\n  User fallback\n"},
	{"identity files accumulate", "lab", "Host lab\n  IdentityFile ~/.ssh/lab_ed25519\nHost *\n  IdentityFile ~/.ssh/all\n  IdentityFile %d/.ssh/%r@%h\n"},
	{"default identities", "lab", "Host lab\n  User dave\n"},
	{"certificate file", "lab", "Host lab\n  IdentityFile ~/.ssh/k\n  CertificateFile ~/.ssh/k-cert.pub\n  CertificateFile /etc/ssh/site-cert.pub\n"},
	{"proxyjump chain", "inner", "Host inner\n  HostName 10.9.1.5\n  ProxyJump alice@gw:2222,mid\n"},
	{"proxycommand", "inner", "Host inner\n  ProxyCommand ssh -W %h:%p login\n"},
	{"proxycommand before proxyjump wins", "inner", "Host inner\n  ProxyCommand nc %h %p\n  ProxyJump gw\n"},
	{"proxyjump before proxycommand wins", "inner", "Host inner\n  ProxyJump gw\nHost *\n  ProxyCommand nc %h %p\n"},
	{"proxycommand none wins", "inner", "Host inner\n  ProxyCommand none\nHost *\n  ProxyJump gw\n"},
	{"known hosts files", "lab", "Host lab\n  UserKnownHostsFile ~/.ssh/kh1 %d/kh2 /etc/kh3\n  GlobalKnownHostsFile /etc/ssh/site_known_hosts /etc/ssh/other\n"},
	{"known hosts first directive wins", "lab", "Host lab\n  UserKnownHostsFile ~/.ssh/first\nHost *\n  UserKnownHostsFile ~/.ssh/second\n"},
	{"keepalive", "lab", "Host lab\n  ServerAliveInterval 5\n  ServerAliveCountMax 2\n"},
	{"keepalive time format", "lab", "Host lab\n  ServerAliveInterval 1m30s\n"},
	{"keepalive off", "lab", "Host lab\n  ServerAliveInterval 0\n"},
	{"identitiesonly and hashing", "lab", "Host lab\n  IdentitiesOnly yes\n  HashKnownHosts yes\n"},
	{"match host after hostname", "lab", "Host lab\n  HostName lab.cluster.example\nMatch host *.cluster.example\n  User matched\n  Port 2204\n"},
	{"match originalhost", "lab", "Host lab\n  HostName 10.9.0.9\nMatch originalhost lab\n  User orig\n"},
	{"match user", "lab", "Host lab\n  User erin\nMatch user erin\n  Port 2205\n"},
	{"match negated criterion", "lab", "Match !host other\n  User notother\n"},
	{"match all", "lab", "Match all\n  ServerAliveCountMax 7\n"},
	{"include relative to ~/.ssh", "lab", "Include inc.conf\nHost *\n  User outer\n"},
	{"include glob", "lab", "Include conf.d/*.conf\n"},
	{"hostname token", "node3", "Host node*\n  HostName %h.ib.cluster.example\n"},
	{"match exec true", "lab", "Match exec true\n  User viaexec\n"},
	{"match exec false skipped", "lab", "Match exec false\n  User viaexec\nHost *\n  User fallback\n"},
	{"match exec quoted, tokens", "lab", "Host lab\n  HostName lab.cluster.example\n  Port 2208\nMatch exec \"test %h:%p:%n = lab.cluster.example:2208:lab\"\n  User tokens\n"},
	{"match exec negated", "lab", "Match !exec \"exit 3\"\n  User negexec\n"},
	{"comments and blanks", "lab", "# comment\n\n   # indented comment\nHost lab\n\n  User frank # not a comment to ssh? \n"},
}

// ssh(1) expands ~ from the password database, not $HOME, and reads
// /etc/ssh: so both oracle tests run in a mount namespace of their own
// (unshare -m) where the user's home directory and, for the second,
// /etc/ssh are directories of the test's, bind-mounted. The machine's
// ~/.ssh and /etc/ssh are never touched.

const childEnv = "RDMASWEEP_SSHCONFIG_CHILD"

// inOwnMounts re-runs the test named run in a new mount namespace with the
// user's home replaced by an empty directory and, when etc is not "",
// /etc/ssh by etc. It reports whether this process is that child.
func inOwnMounts(t *testing.T, run, etc string) bool {
	if os.Getenv(childEnv) != "" {
		return true
	}
	testenv.NeedRoot(t)
	testenv.NeedTool(t, "unshare", "util-linux")
	testenv.NeedTool(t, "ssh", "openssh-client")
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `mount --bind "$1" "$2" && { [ -z "$3" ] || mount --bind "$3" /etc/ssh; } && exec "$4" -test.run "$5" -test.v`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", t.TempDir(), u.HomeDir, etc, exe, "^"+run+"$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "HOME="+u.HomeDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+run) {
		t.Fatalf("the child did not pass %s:\n%s", run, out)
	}
	t.Logf("%s", out)
	return false
}

// TestSSHConfigAgainstOpenSSH resolves each config with the runner and
// with ssh -G and compares host, user, port, identities, certificates,
// jump, proxy command, known-hosts files and keepalive.
func TestSSHConfigAgainstOpenSSH(t *testing.T) {
	if !inOwnMounts(t, "TestSSHConfigAgainstOpenSSH", "") {
		return
	}
	home, _ := os.UserHomeDir()
	sshDir := filepath.Join(home, ".ssh")
	os.MkdirAll(filepath.Join(sshDir, "conf.d"), 0o700)
	os.WriteFile(filepath.Join(sshDir, "inc.conf"), []byte("Host lab\n  User included\n  Port 2206\n"), 0o600)
	os.WriteFile(filepath.Join(sshDir, "conf.d", "a.conf"), []byte("Host lab\n  HostName 10.9.0.10\n"), 0o600)
	os.WriteFile(filepath.Join(sshDir, "conf.d", "b.conf"), []byte("Host *\n  HostName wrong\n  User fromglob\n"), 0o600)
	if len(oracleConfigs) < 20 {
		t.Fatalf("only %d configs; the oracle table wants at least 20", len(oracleConfigs))
	}
	for i, c := range oracleConfigs {
		t.Run(c.name, func(t *testing.T) {
			// Not in ~/.ssh: a relative Include must still be taken from
			// there.
			file := filepath.Join(t.TempDir(), fmt.Sprintf("config%d", i))
			os.WriteFile(file, []byte(c.config), 0o600)
			want := fromSSHG(sshG(t, home, file, c.alias))
			got, set := fromResolved(t, SSHConfig{Address: c.alias, ConfigFile: file})
			if !set {
				if want.ServerAliveInterval != "0" || got.ServerAliveInterval != strconv.Itoa(int(DefaultKeepaliveInterval/time.Second)) {
					t.Errorf("keepalive when ssh_config is silent: ssh %s, runner %s; want 0 and the runner's default", want.ServerAliveInterval, got.ServerAliveInterval)
				}
				got.ServerAliveInterval = want.ServerAliveInterval
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config:\n%s\nrunner: %+v\nssh -G: %+v", c.config, got, want)
			}
		})
	}
}

// TestMatchExecAgainstOpenSSH: a Match exec command sees the same
// %-tokens from the runner as from ssh -G (each writes them to a file),
// and one after a criterion that failed is not run by either.
func TestMatchExecAgainstOpenSSH(t *testing.T) {
	if !inOwnMounts(t, "TestMatchExecAgainstOpenSSH", "") {
		return
	}
	home, _ := os.UserHomeDir()
	dir := t.TempDir()
	out, never := filepath.Join(dir, "tokens"), filepath.Join(dir, "never")
	file := filepath.Join(dir, "config")
	config := "Host lab\n  HostName lab.cluster.example\n  Port 2209\n" +
		"Match exec \"echo %h %n %p %r %u %d %l %L %i %k %C %% > " + out + "\"\n  User fromexec\n" +
		"Match host nomatch exec \"touch " + never + "\"\n  User never\n"
	os.WriteFile(file, []byte(config), 0o600)
	for _, planUser := range []string{"", "bob"} {
		os.Remove(out)
		var want oracleView
		if planUser == "" {
			want = fromSSHG(sshG(t, home, file, "lab"))
		} else {
			want = fromSSHG(sshG(t, home, file, planUser+"@lab"))
		}
		fromSSH, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("ssh -G did not run the exec: %v", err)
		}
		os.Remove(out)
		got, _ := fromResolved(t, SSHConfig{Address: "lab", User: planUser, ConfigFile: file})
		fromRunner, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("the runner did not run the exec: %v", err)
		}
		if string(fromRunner) != string(fromSSH) {
			t.Errorf("user %q: the exec's tokens\nrunner: %sssh -G: %s", planUser, fromRunner, fromSSH)
		}
		if got.User != want.User || got.Hostname != want.Hostname || got.Port != want.Port {
			t.Errorf("user %q: runner %s@%s:%s, ssh -G %s@%s:%s", planUser, got.User, got.Hostname, got.Port, want.User, want.Hostname, want.Port)
		}
		t.Logf("user %q: tokens %s", planUser, strings.TrimSpace(string(fromSSH)))
	}
	if _, err := os.Stat(never); err == nil {
		t.Errorf("an exec after a failed criterion was run")
	}
}

// TestSystemSSHConfig checks /etc/ssh/ssh_config handling against ssh -G:
// the system file is read after ~/.ssh/config, the first value wins, and
// its relative Include is taken from /etc/ssh (Debian's includes
// ssh_config.d/*.conf at the top).
func TestSystemSSHConfig(t *testing.T) {
	etc := ""
	if os.Getenv(childEnv) == "" {
		etc = t.TempDir()
		os.MkdirAll(filepath.Join(etc, "ssh_config.d"), 0o755)
		os.WriteFile(filepath.Join(etc, "ssh_config"), []byte(`Include ssh_config.d/*.conf
Host *
    SendEnv LANG LC_*
    HashKnownHosts yes
    GSSAPIAuthentication yes
    User systemuser
    ServerAliveInterval 42
    IdentityFile /etc/ssh/site_key
`), 0o644)
		os.WriteFile(filepath.Join(etc, "ssh_config.d", "site.conf"), []byte("Host lab*\n  Port 2299\n  GlobalKnownHostsFile /etc/ssh/site_known_hosts\n"), 0o644)
	}
	if !inOwnMounts(t, "TestSystemSSHConfig", etc) {
		return
	}
	if b, _ := os.ReadFile(SystemSSHConfig); !strings.Contains(string(b), "systemuser") {
		t.Fatalf("%s is not the test's: the bind mount did not take", SystemSSHConfig)
	}
	home, _ := os.UserHomeDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host lab1\n  User homeuser\n  HostName 10.9.2.1\n  IdentityFile ~/.ssh/lab\n"), 0o600)
	for _, alias := range []string{"lab1", "lab2", "other"} {
		want := fromSSHG(sshG(t, home, "", alias))
		got, _ := fromResolved(t, SSHConfig{Address: alias})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nrunner: %+v\nssh -G: %+v", alias, got, want)
		}
	}
}
