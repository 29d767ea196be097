// Package testhosts starts real OpenSSH hosts for tests: each host is a Linux
// network namespace with its own sshd, joined by a veth pair to a bridge in
// the root namespace, where the test (and the runner it drives) runs.
//
// Rules it keeps:
//   - Addresses come only from the documentation subnet 198.51.100.0/24
//     (or, with RDMASWEEP_TESTNET=N, the benchmarking subnet 198.18.N.0/24):
//     .0/25 is the main network (the bridge is .1) and .128/25 the
//     bastion's private network, which the root namespace has no route
//     to. Not 192.0.2.0/24: this kind of machine has its real uplink (and
//     default gateway 192.0.2.1) there; nor 203.0.113.0/24, which holds
//     the package registries' route.
//   - Each sshd runs in its own mount namespace with a tmpfs on
//     /var/tmp (mode 1777, as the real one) holding DeployDir (1777 too),
//     and one on RunDir (/run/rdmasweep, node's NVMe-oF records),
//     so hosts never share what the runner deploys there, at the default
//     per-user node.remote_path or under DeployDir, and with /etc/passwd and /etc/group bind-mounted to copies
//     that add the test accounts (User, PeerUser, NoisyUser, NoShellUser), so the
//     machine's own account files are never touched.
//   - One harness instance at a time on the machine: Start takes an flock
//     on LockFile for the test's life, because `go test ./...` runs packages
//     in parallel and several packages use the harness. Whatever a crashed
//     earlier run left (namespaces, bridge, processes) is removed at Start,
//     found by name prefix and `ip netns pids`, never by process name.
//   - It needs root, sshd, ip and nft (and dropbear for Options.Dropbear):
//     without them the test skips (fails under CI=true) through
//     testbed/testenv.
//   - Only the hosts a test asks for are built: each costs a namespace, key
//     generation and a server start.
package testhosts

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rdmasweep/testbed/netns"
	"rdmasweep/testbed/testenv"
)

const (
	// VarTmp is private to each host (a tmpfs in the host's mount
	// namespace, mode 1777): the plan's default node.remote_path,
	// /var/tmp/rdmasweep-UID/node, lies inside it.
	VarTmp = "/var/tmp"
	// DeployDir is a shared, sticky directory (mode 1777, root's) in
	// VarTmp, as /tmp is: tests deploy to a directory of their own in it.
	DeployDir = VarTmp + "/rdmasweep"
	// RunDir is private to each host too (a tmpfs over the machine's
	// /run/rdmasweep): node's NVMe-oF records live in it.
	RunDir = "/run/rdmasweep"

	sftpServer = "/usr/lib/openssh/sftp-server"
	sshd       = "/usr/sbin/sshd"
	// dropbear runs this path for the sftp subsystem (Debian's build);
	// openssh-sftp-server links it to its own sftp-server.
	dropbear     = "/usr/sbin/dropbear"
	dropbearSFTP = "/usr/lib/sftp-server"
)

// The instance's names and addresses. The default instance uses
// 198.51.100.0/24. RDMASWEEP_TESTNET=N (1..99) selects another, on
// 198.18.N.0/24 with its own names, lock and records, so several checkouts
// can run their tests on one machine at once without touching each other.
// 198.18.0.0/24 is left to the Slurm lab.
var (
	// LockFile serialises harness instances across test processes.
	LockFile   = "/run/rdmasweep-testhosts" + instanceTag + ".lock"
	prefix     = "rsw" + instanceTag + "-" // namespace names
	bridge     = "rswbr" + instanceNum
	vethPrefix = "rsw" + instanceTag + "v" // root-side veth names
	subnet     = instanceNet + "0/24"
	dirPrefix  = "rdmasweep-th" + instanceTag + "-"
	mainNet    = instanceNet       // .1 bridge, .10 and up hosts; /25
	innerNet   = instanceNet + "1" // + "29" bastion, + "30" inner; /25
	pidRecord  = "/run/rdmasweep-testhosts" + instanceTag + ".pids"

	instanceNum, instanceTag, instanceNet = instance()
)

// instance reads RDMASWEEP_TESTNET: "" or "0" is the default instance.
func instance() (num, tag, net3 string) {
	v := os.Getenv("RDMASWEEP_TESTNET")
	n, err := strconv.Atoi(v)
	if v == "" || v == "0" || err != nil || n < 1 || n > 99 {
		return "0", "", "198.51.100."
	}
	return v, v, "198.18." + v + "."
}

// Options chooses the hosts.
type Options struct {
	// Hosts names hosts on the main network, e.g. {"a", "b"}. Names are
	// short lowercase words; they become ssh_config aliases.
	Hosts []string
	// Bastion adds "bastion" (main network and private network) and
	// "inner" (private network only, reachable only through the bastion;
	// its ssh_config alias has ProxyJump bastion).
	Bastion bool
	// RSAHost adds "rsa", a host with an ed25519 and an RSA host key of
	// which KnownHosts lists only the RSA one (as ssh-rsa): a client must
	// pick its host key algorithms from known_hosts, and offer RSA as
	// rsa-sha2-*, or the key it is shown will not match.
	RSAHost bool
	// CertHost adds "cert", whose ed25519 host key is certified by the
	// harness's host CA (HostCAKey, `ssh-keygen -s CA -h`) for its
	// address; KnownHosts lists its plain key too. SignHostCert re-signs it.
	CertHost bool
	// Dropbear adds "dropbear", a Dropbear server (not OpenSSH) that takes
	// KeyFile for root and serves SFTP with OpenSSH's sftp-server.
	Dropbear bool
	// GSSAPIHost adds "gss", an OpenSSH host that takes only
	// gssapi-with-mic (Kerberos). Its keytab holds one made-up key: enough
	// for sshd to start the GSS-API exchange, never to complete it.
	GSSAPIHost bool
	// SSHDConfig adds sshd_config lines to the named hosts, before the
	// harness's own (sshd takes a keyword's first value), e.g.
	// {"a": "MaxSessions 1"}.
	SSHDConfig map[string]string
	// EmptyRootHome gives root an empty home directory on the hosts, so
	// a login does not run this machine's ~/.bashrc (bash runs it for an
	// SSH command). Where that starts pyenv it costs seconds a login,
	// which a benchmark of the runner must not count.
	EmptyRootHome bool
	// SlowShell, when not 0, makes User's login shell bash, with a home
	// directory whose ~/.bashrc sleeps that long, as one that runs
	// `pyenv init`, conda's hook or environment modules does: bash reads
	// ~/.bashrc for every SSH command, so each session costs that much
	// more. Tests of how many sessions the runner opens use it; the
	// others leave it 0, which keeps the suite's time.
	SlowShell time.Duration
}

// Net is a running set of hosts. Everything is torn down by t.Cleanup.
type Net struct {
	// Dir holds the keys and configuration (a temp dir, removed at the end).
	Dir string
	// KeyFile is an unencrypted ed25519 private key every host accepts
	// for root.
	KeyFile string
	// KnownHosts lists every host's keys under its address (port 22).
	KnownHosts string
	// SSHConfig has a Host alias per host name: HostName, User root,
	// Port 22, IdentityFile KeyFile; "inner" also has ProxyJump bastion.
	// A final "Host *" sets UserKnownHostsFile KnownHosts for OpenSSH.
	SSHConfig string
	// Hosts by name.
	Hosts map[string]*Host
	// User is an unprivileged account (uid UserUID, home /, shell
	// /bin/sh) that exists only on the hosts and accepts KeyFile, like
	// root. Use it to test what root logins lack: OpenSSH delivers
	// session signals only to non-root sessions (it skips post-auth
	// privilege separation for root).
	User string
	// NoisyUser is like User, but its login shell prints a line and a
	// partial line on stdout before it runs any command, as cluster
	// startup files often do.
	NoisyUser string
	// NoShellUser is like User, but its login shell cannot run a command:
	// it execs a shell that is not installed (exit 127), as a shell from
	// an unmounted software tree does. sshd lets it log in; a user whose
	// shell path does not exist at all is refused at authentication.
	NoShellUser string
	// CertUser is an account that takes only user certificates signed by
	// UserCAKey (TrustedUserCAKeys; no authorized_keys), on every OpenSSH
	// host. SignUserCert makes one.
	CertUser string
	// HostCAKey and UserCAKey are the CAs' private keys (ed25519, no
	// passphrase); their public halves are beside them (.pub).
	HostCAKey, UserCAKey string
}

// User and UserUID name the hosts' unprivileged account; NoisyUser and
// NoisyUID the one with a noisy login shell; NoShellUser and NoShellUID
// the one whose login shell is missing.
const (
	User        = "rsw"
	UserUID     = 4242
	NoisyUser   = "rswnoisy"
	NoisyUID    = 4243
	NoShellUser = "rswnosh"
	NoShellUID  = 4244
	CertUser    = "rswcert"
	CertUID     = 4245
	// PeerUser is a second plain account like User: two users deploying
	// to one shared directory.
	PeerUser = "rswpeer"
	PeerUID  = 4246
)

// MissingShell is the shell NoShellUser's login shell execs; it does not
// exist on the hosts.
const MissingShell = "/opt/rdmasweep-missing/bin/sh"

// NoisyGreeting is what NoisyUser's login shell prints first.
const NoisyGreeting = "Welcome to the test cluster\nno newline here"

// writeAccounts writes copies of /etc/passwd and /etc/group with User,
// NoisyUser and NoShellUser added, for the hosts to bind-mount, and the
// login shells of the last two.
func writeAccounts(t testing.TB, dir string, emptyRootHome bool, slowShell time.Duration) {
	t.Helper()
	userHome, userShell := "/", "/bin/sh"
	if slowShell > 0 {
		userHome, userShell = slowHome(t, dir, slowShell), "/bin/bash"
	}
	noisy := filepath.Join(dir, "noisy-sh")
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s' '%s'\nexec /bin/sh \"$@\"\n", NoisyGreeting)
	if err := os.WriteFile(noisy, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	noShell := filepath.Join(dir, "missing-sh")
	if err := os.WriteFile(noShell, []byte("#!/bin/sh\nexec "+MissingShell+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ name, line string }{
		{"passwd", fmt.Sprintf("%s:x:%d:%d:rdmasweep test:%s:%s\n%s:x:%d:%d:rdmasweep noisy test:/:%s\n%s:x:%d:%d:rdmasweep no shell test:/:%s\n%s:x:%d:%d:rdmasweep cert test:/:/bin/sh\n%s:x:%d:%d:rdmasweep peer test:/:/bin/sh\n",
			User, UserUID, UserUID, userHome, userShell, NoisyUser, NoisyUID, NoisyUID, noisy, NoShellUser, NoShellUID, NoShellUID, noShell, CertUser, CertUID, CertUID, PeerUser, PeerUID, PeerUID)},
		{"group", fmt.Sprintf("%s:x:%d:\n%s:x:%d:\n%s:x:%d:\n%s:x:%d:\n%s:x:%d:\n", User, UserUID, NoisyUser, NoisyUID, NoShellUser, NoShellUID, CertUser, CertUID, PeerUser, PeerUID)},
	} {
		b, err := os.ReadFile("/etc/" + f.name)
		if err != nil {
			t.Fatal(err)
		}
		if f.name == "passwd" && emptyRootHome {
			b = rootHome(t, b, filepath.Join(dir, "root-home"))
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), append(b, f.line...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// slowHome makes User's home under dir, with a ~/.bashrc that sleeps d,
// and returns its path.
func slowHome(t testing.TB, dir string, d time.Duration) string {
	t.Helper()
	home := filepath.Join(dir, "home-"+User)
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := fmt.Sprintf("# what pyenv init, conda or modules cost a login\nsleep %.3f\n", d.Seconds())
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

// rootHome makes home, empty, and returns passwd with it as root's home.
func rootHome(t testing.TB, passwd []byte, home string) []byte {
	t.Helper()
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(passwd), "\n")
	for i, l := range lines {
		if f := strings.Split(l, ":"); len(f) == 7 && f[0] == "root" {
			f[5] = home
			lines[i] = strings.Join(f, ":")
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

// Host is one namespace host.
type Host struct {
	Name string
	// Addr is where the host's sshd listens: its main-network address, or
	// for "inner" its private-network address.
	Addr string
	Port int
	// NS is the network namespace name (for `ip netns exec`).
	NS string
	// HostKeyFiles are the public host key files (.pub).
	HostKeyFiles []string
	// SSHDPid is the daemonized sshd's pid.
	SSHDPid int
	// Log is sshd's log file (-E).
	Log string

	veth     string // root-side veth; "" for inner
	dir      string
	hostKeys []string // private host key files
	certFile string   // the host certificate, for "cert"
	n        *Net
}

// Start builds the hosts and returns when every sshd accepts connections.
func Start(t testing.TB, opts Options) *Net {
	t.Helper()
	needTools(t, opts)
	netns.Lock(t, "testhosts", LockFile)
	cleanStale(t)
	netns.CheckSubnetFree(t, "testhosts", subnet)

	n := newNet(t, opts.EmptyRootHome, opts.SlowShell)
	pub := n.writeKeys(t)
	authorized := filepath.Join(n.Dir, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o644); err != nil {
		t.Fatal(err)
	}

	mustRun(t, "ip", "link", "add", bridge, "type", "bridge")
	mustRun(t, "ip", "addr", "add", mainNet+"1/25", "dev", bridge)
	mustRun(t, "ip", "link", "set", bridge, "up")
	// The rest of the subnet (the bastion's private network) must not
	// follow the default route off the machine: a direct dial to "inner"
	// fails here, at once, and no test packet leaves.
	mustRun(t, "ip", "route", "add", "unreachable", subnet)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(VarTmp, 0o1777); err != nil {
		t.Fatal(err)
	}

	hosts := hostNames(t, n, &opts)
	raiseLimits(t, len(hosts))
	n.addHosts(t, hosts)
	if opts.Bastion {
		n.addInner(t)
	}
	// Each host's keys, server and banner are its own: they are made at
	// once, so sixty hosts start in about the time of a few.
	names := n.names()
	lines := make([]hostLines, len(names))
	eachHost(t, names, func(i int, name string) (err error) {
		lines[i], err = n.startHost(n.Hosts[name], opts, authorized, pub)
		return err
	})
	var known, config bytes.Buffer
	for _, l := range lines {
		known.WriteString(l.known)
		config.WriteString(l.config)
	}
	n.KnownHosts = filepath.Join(n.Dir, "known_hosts")
	n.SSHConfig = filepath.Join(n.Dir, "ssh_config")
	// For OpenSSH's own client (the benchmark, a person debugging): the
	// ProxyJump hop does not inherit -o options, only the config file.
	fmt.Fprintf(&config, "Host *\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n", n.KnownHosts)
	if err := os.WriteFile(n.KnownHosts, known.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.SSHConfig, config.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	eachHost(t, names, func(_ int, name string) error { return waitBanner(n.Hosts[name]) })
	return n
}

// eachHost runs fn for every name at once and fails the test with every
// host's error, in the names' order.
func eachHost(t testing.TB, names []string, fn func(i int, name string) error) {
	t.Helper()
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("testhosts: %v", err)
	}
}

// needTools skips the test (fails it under CI) without root or a tool
// the hosts opts asks for need.
func needTools(t testing.TB, opts Options) {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedTool(t, "ip", "iproute2")
	testenv.NeedTool(t, "nft", "nftables")
	testenv.NeedTool(t, "ssh-keygen", "openssh-client")
	testenv.NeedTool(t, "unshare", "util-linux")
	testenv.NeedTool(t, "nsenter", "util-linux")
	if _, err := os.Stat(sshd); err != nil {
		testenv.Skip(t, "sshd not found (apt-get install openssh-server)")
	}
	if _, err := os.Stat(sftpServer); err != nil {
		testenv.Skip(t, "sftp-server not found (apt-get install openssh-sftp-server)")
	}
	if opts.Dropbear {
		testenv.NeedTool(t, "dropbear", "dropbear-bin")
		testenv.NeedTool(t, "dropbearconvert", "dropbear-bin")
		if _, err := os.Stat(dropbearSFTP); err != nil {
			testenv.Skip(t, dropbearSFTP+" not found (apt-get install openssh-sftp-server)")
		}
	}
}

// newNet makes the harness's directory with the account files, torn
// down with the test.
func newNet(t testing.TB, emptyRootHome bool, slowShell time.Duration) *Net {
	t.Helper()
	// Not t.TempDir: its parent is 0700, and the unprivileged user's
	// sshd reads authorized_keys itself.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Net{Dir: dir, Hosts: map[string]*Host{}, User: User, NoisyUser: NoisyUser, NoShellUser: NoShellUser, CertUser: CertUser}
	writeAccounts(t, n.Dir, emptyRootHome, slowShell)
	t.Cleanup(func() { n.teardown(t) })
	return n
}

// writeKeys makes the login key every host takes (KeyFile) and the host
// and user CAs, and returns the login key's public half.
func (n *Net) writeKeys(t testing.TB) []byte {
	t.Helper()
	n.KeyFile = filepath.Join(n.Dir, "id_ed25519")
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdmasweep-test", "-f", n.KeyFile)
	pub, err := os.ReadFile(n.KeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	n.HostCAKey = filepath.Join(n.Dir, "host_ca")
	n.UserCAKey = filepath.Join(n.Dir, "user_ca")
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdmasweep host CA", "-f", n.HostCAKey)
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdmasweep user CA", "-f", n.UserCAKey)
	return pub
}

// hostNames are the main network's hosts opts asks for, in order: its
// Hosts, then the special ones. The gss host's sshd lines go into opts.
func hostNames(t testing.TB, n *Net, opts *Options) []string {
	t.Helper()
	names := append([]string(nil), opts.Hosts...)
	if opts.RSAHost {
		names = append(names, "rsa")
	}
	if opts.CertHost {
		names = append(names, "cert")
	}
	if opts.Dropbear {
		names = append(names, "dropbear")
	}
	if opts.GSSAPIHost {
		names = append(names, "gss")
		writeKeytab(t, filepath.Join(n.Dir, "krb5.keytab"))
		if opts.SSHDConfig == nil {
			opts.SSHDConfig = map[string]string{}
		}
		opts.SSHDConfig["gss"] = "GSSAPIAuthentication yes\nGSSAPIStrictAcceptorCheck no\nAuthenticationMethods gssapi-with-mic"
	}
	if opts.Bastion {
		names = append(names, "bastion")
	}
	return names
}

// maxHosts is how many hosts the main network holds: .10 to .126 of
// its /25, .127 being its broadcast address.
const maxHosts = 117

// addHosts makes a namespace per name, joined to the bridge. The root
// namespace's side is one `ip -batch` for every host (one process, not
// four per host); each namespace's own side is one `ip -n NS -batch`,
// all at once.
func (n *Net) addHosts(t testing.TB, names []string) {
	t.Helper()
	if len(names) > maxHosts {
		t.Fatalf("testhosts: %d hosts asked for; the main network holds %d", len(names), maxHosts)
	}
	var root strings.Builder
	for i, name := range names {
		h := &Host{Name: name, Addr: mainNet + strconv.Itoa(10+i), Port: 22, NS: prefix + name, veth: vethPrefix + strconv.Itoa(i), n: n}
		if _, dup := n.Hosts[name]; dup || name == "inner" {
			t.Fatalf("testhosts: host name %q used twice or reserved", name)
		}
		n.Hosts[name] = h
		fmt.Fprintf(&root, "netns add %s\nlink add %s type veth peer name eth0 netns %s\nlink set %s master %s\nlink set %s up\n",
			h.NS, h.veth, h.NS, h.veth, bridge, h.veth)
	}
	if err := runIn("", strings.NewReader(root.String()), "ip", "-batch", "-"); err != nil {
		t.Fatalf("testhosts: %v", err)
	}
	eachHost(t, names, func(_ int, name string) error {
		h := n.Hosts[name]
		cmds := "addr add " + h.Addr + "/25 dev eth0\nlink set eth0 up\nlink set lo up\n"
		return runIn("", strings.NewReader(cmds), "ip", "-n", h.NS, "-batch", "-")
	})
}

// addInner makes "inner", on the bastion's private network only.
func (n *Net) addInner(t testing.TB) {
	t.Helper()
	b := n.Hosts["bastion"]
	in := &Host{Name: "inner", Addr: innerNet + "30", Port: 22, NS: prefix + "inner", n: n}
	n.Hosts["inner"] = in
	mustRun(t, "ip", "netns", "add", in.NS)
	nsRun(t, b.NS, "ip", "link", "add", "priv0", "type", "veth", "peer", "name", "eth0", "netns", in.NS)
	nsRun(t, b.NS, "ip", "addr", "add", innerNet+"29/25", "dev", "priv0")
	nsRun(t, b.NS, "ip", "link", "set", "priv0", "up")
	nsRun(t, in.NS, "ip", "addr", "add", in.Addr+"/25", "dev", "eth0")
	nsRun(t, in.NS, "ip", "link", "set", "eth0", "up")
	nsRun(t, in.NS, "ip", "link", "set", "lo", "up")
}

// hostLines are a host's lines of known_hosts and of ssh_config.
type hostLines struct{ known, config string }

// startHost makes h's host keys and its ssh_config alias, returned as its
// lines of known_hosts and ssh_config, then starts its server. It may run
// beside other hosts' startHost.
func (n *Net) startHost(h *Host, opts Options, authorized string, pub []byte) (hostLines, error) {
	name := h.Name
	h.dir = filepath.Join(n.Dir, name)
	if err := os.Mkdir(h.dir, 0o700); err != nil {
		return hostLines{}, err
	}
	var known, config strings.Builder
	types := []string{"ed25519"}
	if name == "rsa" {
		types = []string{"ed25519", "rsa"}
	}
	var hostKeys []string
	for _, typ := range types {
		f := filepath.Join(h.dir, "ssh_host_"+typ+"_key")
		args := []string{"-q", "-t", typ, "-N", "", "-C", "", "-f", f}
		if typ == "rsa" {
			args = append(args, "-b", "2048")
		}
		if err := run("ssh-keygen", args...); err != nil {
			return hostLines{}, fmt.Errorf("%s: %w", name, err)
		}
		hostKeys = append(hostKeys, f)
		h.HostKeyFiles = append(h.HostKeyFiles, f+".pub")
		p, err := os.ReadFile(f + ".pub")
		if err != nil {
			return hostLines{}, err
		}
		if name != "rsa" || typ == "rsa" {
			fmt.Fprintf(&known, "%s %s\n", h.Addr, strings.TrimSpace(string(p)))
		}
	}
	fmt.Fprintf(&config, "Host %s\n  HostName %s\n  User root\n  Port 22\n  IdentityFile %s\n", name, h.Addr, n.KeyFile)
	if name == "inner" {
		config.WriteString("  ProxyJump bastion\n")
	}
	h.hostKeys = hostKeys
	lines := hostLines{known.String(), config.String()}
	if name == "cert" {
		h.certFile = hostKeys[0] + "-cert.pub"
		if err := n.signHostCert(h, []string{h.Addr}, "always:forever"); err != nil {
			return lines, err
		}
	}
	if name == "dropbear" {
		return lines, n.startDropbear(h, hostKeys[0], pub)
	}
	return lines, n.startSSHD(h, hostKeys, authorized, opts.SSHDConfig[name])
}

func (n *Net) names() []string {
	var s []string
	for name := range n.Hosts {
		s = append(s, name)
	}
	sort.Strings(s)
	return s
}

func (n *Net) startSSHD(h *Host, hostKeys []string, authorized, extra string) error {
	cfg := filepath.Join(h.dir, "sshd_config")
	pidFile := filepath.Join(h.dir, "sshd.pid")
	h.Log = filepath.Join(h.dir, "sshd.log")
	var b strings.Builder
	if extra != "" {
		b.WriteString(strings.TrimSpace(extra) + "\n")
	}
	fmt.Fprintf(&b, "Port 22\nListenAddress %s\n", h.Addr)
	for _, k := range hostKeys {
		fmt.Fprintf(&b, "HostKey %s\n", k)
	}
	if h.certFile != "" {
		fmt.Fprintf(&b, "HostCertificate %s\n", h.certFile)
	}
	fmt.Fprintf(&b, "TrustedUserCAKeys %s.pub\n", n.UserCAKey)
	// The hosts share this machine's home directories, so a login runs
	// the machine's own ~/.bashrc. Where that runs pyenv init, each login
	// takes pyenv's rehash lock, and a login the tests kill while it holds
	// it leaves the lock behind: every later login then waits 60 s for it
	// (seen here, stalling every root test). One second bounds that wait.
	fmt.Fprintf(&b, `SetEnv PYENV_REHASH_TIMEOUT=1
AuthorizedKeysFile %s
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile %s
Subsystem sftp %s
MaxSessions 64
MaxStartups 64
AllowTcpForwarding yes
LogLevel VERBOSE
Match User %s
  AuthorizedKeysFile none
`, authorized, pidFile, sftpServer, CertUser)
	text := b.String()
	if extra != "" {
		// Most keywords take their first value, but MaxStartups its
		// last: the harness's own limits go when the extra lines set them.
		var keep []string
		for _, l := range strings.Split(text, "\n") {
			if (l == "MaxSessions 64" && strings.Contains(extra, "MaxSessions")) ||
				(l == "MaxStartups 64" && strings.Contains(extra, "MaxStartups")) {
				continue
			}
			keep = append(keep, l)
		}
		text = strings.Join(keep, "\n")
	}
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return err
	}
	// unshare -m makes mounts private by default, so the tmpfs stays in
	// this host's mount namespace, which sshd and all its sessions keep.
	script := "mount --bind " + filepath.Join(n.Dir, "passwd") + " /etc/passwd" +
		" && mount --bind " + filepath.Join(n.Dir, "group") + " /etc/group" +
		" && " + privateVarTmp +
		" && KRB5_KTNAME=" + filepath.Join(n.Dir, "krb5.keytab") + " exec " + sshd + " -f " + cfg + " -E " + h.Log
	if err := startIn(h, script); err != nil {
		return err
	}
	var err error
	h.SSHDPid, err = waitPid(h, pidFile)
	return err
}

// waitBanner waits until the host's sshd sends its banner. Hosts not
// reachable from the root namespace are probed from inside their own.
func waitBanner(h *Host) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		if h.veth == "" {
			// Probe from inside: bash's /dev/tcp needs no extra tool.
			out, err := exec.Command("ip", "netns", "exec", h.NS, "bash", "-c",
				"exec 3<>/dev/tcp/"+h.Addr+"/22 && head -c 4 <&3").Output()
			ok = err == nil && string(out) == "SSH-"
		} else {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(h.Addr, "22"), time.Second)
			if err == nil {
				c.SetDeadline(time.Now().Add(time.Second))
				buf := make([]byte, 4)
				_, err = c.Read(buf)
				c.Close()
				ok = err == nil && string(buf) == "SSH-"
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(h.Log)
			return fmt.Errorf("sshd on %s (%s) not answering: %s", h.Name, h.Addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Run runs argv inside the host (its network and mount namespaces, so it
// sees the host's private DeployDir) and returns stdout. It fails the test
// on a non-zero exit.
func (h *Host) Run(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := h.Output(argv...)
	if err != nil {
		t.Fatalf("testhosts: on %s: %v", h.Name, err)
	}
	return out
}

// Output is Run without a test: it returns the error (with stderr).
func (h *Host) Output(argv ...string) (string, error) {
	args := append([]string{"-t", strconv.Itoa(h.SSHDPid), "-m", "-n", "--"}, argv...)
	cmd := exec.Command("nsenter", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, stderr.String())
	}
	return string(out), nil
}

// Pids lists every process in the host's network namespace, sshd included.
func (h *Host) Pids(t testing.TB) []int {
	t.Helper()
	pids, err := netns.Pids(h.NS)
	if err != nil {
		t.Fatalf("testhosts: pids of %s: %v", h.Name, err)
	}
	return pids
}

// SessionPids lists the host's processes other than sshd's own (the
// listener and its per-connection processes): what SSH sessions run or
// left running, e.g. node.
func (h *Host) SessionPids(t testing.TB) []int {
	t.Helper()
	var out []int
	for _, p := range h.Pids(t) {
		if p != h.SSHDPid && !isSSHD(p) {
			out = append(out, p)
		}
	}
	return out
}

// SetLink takes the host's link to the bridge down or up. Down, packets
// to and from the host are dropped silently, as when a cable is pulled.
func (h *Host) SetLink(t testing.TB, up bool) {
	t.Helper()
	if h.veth == "" {
		t.Fatalf("testhosts: %s has no link to the root namespace", h.Name)
	}
	state := "down"
	if up {
		state = "up"
	}
	mustRun(t, "ip", "link", "set", h.veth, state)
}

// SteerFlows keeps each flow through the host's link on one CPU, as a
// NIC's receive-side scaling does, by turning on RPS over every CPU at
// both ends of its veth. Without it a veth queues each packet on the
// backlog of the CPU that sent it, so on a loaded machine a sender that
// moves between CPUs reorders its own flow, and TCP fast-retransmits
// what was only late (measured: 36 and 67 retransmits in a clean row,
// every one D-SACKed, TcpExtTCPFastRetrans 36 and 67, no timeouts).
func (h *Host) SteerFlows(t testing.TB) {
	t.Helper()
	if h.veth == "" {
		t.Fatalf("testhosts: %s has no link to the root namespace", h.Name)
	}
	mask := cpuMask(runtime.NumCPU())
	if err := os.WriteFile("/sys/class/net/"+h.veth+"/queues/rx-0/rps_cpus", []byte(mask), 0o644); err != nil {
		t.Fatalf("testhosts: steer %s's flows: %v", h.Name, err)
	}
	nsRun(t, h.NS, "sh", "-c", "echo "+mask+" > /sys/class/net/eth0/queues/rx-0/rps_cpus")
}

// cpuMask is the sysfs CPU mask of CPUs 0 to n-1: hex, in comma-separated
// groups of 32 CPUs, as rps_cpus takes it.
func cpuMask(n int) string {
	hex := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(n)), big.NewInt(1)).Text(16)
	var groups []string
	for len(hex) > 8 {
		groups = append([]string{hex[len(hex)-8:]}, groups...)
		hex = hex[:len(hex)-8]
	}
	return strings.Join(append([]string{hex}, groups...), ",")
}

// DropSYN makes the host drop every new incoming TCP connection silently
// (an nftables rule in its namespace), so a connect hangs until timeout.
func (h *Host) DropSYN(t testing.TB) {
	t.Helper()
	rules := "table inet rswdrop {\n chain input {\n  type filter hook input priority 0;\n  tcp flags & (syn | ack) == syn drop\n }\n}\n"
	cmd := exec.Command("ip", "netns", "exec", h.NS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testhosts: drop SYN on %s: %v: %s", h.Name, err, out)
	}
}

// BreakSh makes /bin/sh unrunnable on h until the test ends: /dev/null is
// bind-mounted over it (over what its link points to) in h's own mount
// namespace, so nothing outside the host sees it. Logins whose shell is
// bash still run commands; `sh` fails with exit 126. Users whose login
// shell is /bin/sh can no longer log in at all.
func (h *Host) BreakSh(t testing.TB) {
	t.Helper()
	h.Run(t, "mount", "--bind", "/dev/null", "/bin/sh")
	t.Cleanup(func() {
		if _, err := h.Output("umount", "/bin/sh"); err != nil {
			t.Errorf("testhosts: restore /bin/sh on %s: %v", h.Name, err)
		}
	})
}

// AcceptSYN undoes DropSYN.
func (h *Host) AcceptSYN(t testing.TB) {
	t.Helper()
	nsRun(t, h.NS, "nft", "delete", "table", "inet", "rswdrop")
}

func (n *Net) teardown(t testing.TB) {
	var wg sync.WaitGroup
	for _, name := range n.names() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			netns.Kill(n.Hosts[name].NS)
		}()
	}
	wg.Wait()
	var del strings.Builder
	for _, name := range n.names() {
		del.WriteString("netns delete " + n.Hosts[name].NS + "\n")
	}
	// -force: one namespace already gone does not keep the rest.
	cmd := exec.Command("ip", "-force", "-batch", "-")
	cmd.Stdin = strings.NewReader(del.String())
	cmd.Run()
	exec.Command("ip", "link", "delete", bridge).Run()
	exec.Command("ip", "route", "delete", "unreachable", subnet).Run()
	os.Remove(pidRecord)
}

// pidRecord (above) lists the sshd pids of the running instance, so a
// later run can kill them if this one crashed before teardown.

func recordPid(pid int) {
	f, err := os.OpenFile(pidRecord, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, pid)
	f.Close()
}

// cleanStale removes what an earlier, crashed instance left. It runs with
// the lock held, so nothing it finds belongs to a live instance.
func cleanStale(t testing.TB) {
	if b, err := os.ReadFile(pidRecord); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && isSSHD(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.Remove(pidRecord)
	}
	if dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*")); err == nil {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	netns.RemoveStale(t, "testhosts", prefix, bridge, vethPrefix)
	exec.Command("ip", "route", "delete", "unreachable", subnet).Run()
}

// isSSHD guards the recorded-pid kill: pids are reused, so only a process
// still running sshd is ours.
func isSSHD(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && (exe == sshd || exe == dropbear)
}

func mustRun(t testing.TB, name string, args ...string) {
	t.Helper()
	netns.MustRun(t, "testhosts", name, args...)
}

func nsRun(t testing.TB, ns string, args ...string) {
	t.Helper()
	mustRun(t, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// privateVarTmp gives a host its own /var/tmp, holding DeployDir, and its
// own RunDir, where node keeps its NVMe-oF records (so a test may plant
// them on a host without the machine or other hosts seeing them).
const privateVarTmp = "mount -t tmpfs -o mode=1777 tmpfs " + VarTmp + " && install -d -m 1777 " + DeployDir +
	" && mkdir -p " + RunDir + " && mount -t tmpfs -o mode=755 tmpfs " + RunDir

// startIn runs a host's server: script, through sh, in the host's network
// namespace and in a mount namespace of its own. Mount namespaces cost
// this kind of machine a kernel wait each, taken one at a time however
// many hosts start at once: sixty-four hosts took about 17 s here.
func startIn(h *Host, script string) error {
	if err := runIn(h.NS, nil, "unshare", "-m", "--propagation", "private", "sh", "-c", script); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	return nil
}

// run runs a setup command; its error holds the command and its output.
func run(name string, args ...string) error { return runIn("", nil, name, args...) }

// runIn runs a setup command in network namespace ns ("" for this one),
// with stdin; its error holds the command and its output.
func runIn(ns string, stdin io.Reader, name string, args ...string) error {
	if ns != "" {
		name, args = "ip", append([]string{"netns", "exec", ns, name}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// signHostCert certifies h's first host key with the host CA.
func (n *Net) signHostCert(h *Host, principals []string, validity string) error {
	os.Remove(h.certFile)
	return run("ssh-keygen", "-q", "-s", n.HostCAKey, "-h", "-I", h.Name+"-host", "-n", strings.Join(principals, ","),
		"-V", validity, h.hostKeys[0]+".pub")
}

// SignHostCert re-signs the "cert" host's certificate for principals and
// validity (ssh-keygen -V, e.g. "-2d:-1d" for one that has expired) and
// restarts its sshd on it (SIGHUP: sshd re-executes itself, same pid).
func (h *Host) SignHostCert(t testing.TB, principals []string, validity string) {
	t.Helper()
	if h.certFile == "" {
		t.Fatalf("testhosts: %s has no host certificate (Options.CertHost)", h.Name)
	}
	if err := h.n.signHostCert(h, principals, validity); err != nil {
		t.Fatalf("testhosts: %v", err)
	}
	if err := syscall.Kill(h.SSHDPid, syscall.SIGHUP); err != nil {
		t.Fatalf("testhosts: SIGHUP sshd on %s: %v", h.Name, err)
	}
	// The old listener closes and the new one opens: wait for a banner
	// from the new one.
	time.Sleep(200 * time.Millisecond)
	if err := waitBanner(h); err != nil {
		t.Fatalf("testhosts: %v", err)
	}
}

// SignUserCert certifies a new ed25519 key for principals with the user
// CA, valid for validity (ssh-keygen -V), and returns the private key's
// path; the certificate is beside it as KEY-cert.pub, where ssh looks.
func (n *Net) SignUserCert(t testing.TB, dir string, principals []string, validity string) string {
	t.Helper()
	key := filepath.Join(dir, "id_ed25519")
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cert user", "-f", key)
	mustRun(t, "ssh-keygen", "-q", "-s", n.UserCAKey, "-I", "rdmasweep-user", "-n", strings.Join(principals, ","),
		"-V", validity, key+".pub")
	return key
}

// startDropbear runs Dropbear on h, in a mount namespace like sshd's, with
// /root bind-mounted to a directory holding root's authorized_keys (so the
// machine's /root is never touched).
func (n *Net) startDropbear(h *Host, hostKey string, authorized []byte) error {
	dbKey := filepath.Join(h.dir, "dropbear_ed25519_host_key")
	if err := run("dropbearconvert", "openssh", "dropbear", hostKey, dbKey); err != nil {
		return err
	}
	home := filepath.Join(h.dir, "root")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		return err
	}
	os.Chmod(h.dir, 0o755)
	if err := os.WriteFile(filepath.Join(home, ".ssh", "authorized_keys"), authorized, 0o600); err != nil {
		return err
	}
	pidFile := filepath.Join(h.dir, "dropbear.pid")
	h.Log = filepath.Join(h.dir, "dropbear.log")
	script := "mount --bind " + home + " /root" +
		" && " + privateVarTmp +
		" && exec " + dropbear + " -E -r " + dbKey + " -p " + h.Addr + ":22 -P " + pidFile + " </dev/null >/dev/null 2>" + h.Log
	if err := startIn(h, script); err != nil {
		return err
	}
	var err error
	h.SSHDPid, err = waitPid(h, pidFile)
	return err
}

// waitPid waits for a daemon's pid file and records the pid.
func waitPid(h *Host, pidFile string) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := os.ReadFile(pidFile)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(p))); err == nil && pid > 0 {
				recordPid(pid)
				return pid, nil
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(h.Log)
			return 0, fmt.Errorf("the server on %s wrote no pid file: %s", h.Name, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Blackhole makes the host drop every packet in and out (an nftables
// rule in its namespace), as when a link or a host goes silent: nothing
// is refused, nothing answers. Undone by Unblackhole.
func (h *Host) Blackhole(t testing.TB) {
	t.Helper()
	rules := "table inet rswhole {\n chain input {\n  type filter hook input priority 0; policy drop;\n }\n chain output {\n  type filter hook output priority 0; policy drop;\n }\n}\n"
	cmd := exec.Command("ip", "netns", "exec", h.NS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testhosts: blackhole %s: %v: %s", h.Name, err, out)
	}
}

// Unblackhole undoes Blackhole.
func (h *Host) Unblackhole(t testing.TB) {
	t.Helper()
	nsRun(t, h.NS, "nft", "delete", "table", "inet", "rswhole")
}

// writeKeytab writes a Kerberos keytab (format 0x502) holding one random
// aes256 key for host/gss@RDMASWEEP.TEST: sshd's GSS-API acceptor needs a
// keytab with something in it before it answers a gssapi-with-mic request.
func writeKeytab(t testing.TB, path string) {
	t.Helper()
	var e bytes.Buffer
	str := func(s string) {
		binary.Write(&e, binary.BigEndian, uint16(len(s)))
		e.WriteString(s)
	}
	binary.Write(&e, binary.BigEndian, uint16(2)) // components
	str("RDMASWEEP.TEST")
	str("host")
	str("gss")
	binary.Write(&e, binary.BigEndian, uint32(3)) // KRB5_NT_SRV_HST
	binary.Write(&e, binary.BigEndian, uint32(time.Now().Unix()))
	e.WriteByte(1)                                 // kvno
	binary.Write(&e, binary.BigEndian, uint16(18)) // aes256-cts-hmac-sha1-96
	key := make([]byte, 32)
	crand.Read(key)
	binary.Write(&e, binary.BigEndian, uint16(len(key)))
	e.Write(key)
	var f bytes.Buffer
	f.Write([]byte{0x05, 0x02})
	binary.Write(&f, binary.BigEndian, int32(e.Len()))
	f.Write(e.Bytes())
	if err := os.WriteFile(path, f.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// raiseLimits raises, for the Net's life, the limits of this machine that
// its n namespace hosts share while real hosts each have their own (they
// are not per network namespace):
//   - the neighbour table, net.ipv4.neigh.default.gc_thresh3 (1024 by
//     default, for all namespaces together): a pairwise sweep makes every
//     host resolve every other, n(n−1) entries, and at 32 hosts the
//     kernel said "neighbor table overflow" and a round's client hung in
//     its connect;
//   - the per-CPU queue of received packets, net.core.netdev_max_backlog
//     (1000), through which each ARP broadcast reaches every host's veth:
//     after sweeps over 16, 32 and 64 hosts /proc/net/softnet_stat showed
//     7,224 and 8,407 packets dropped on the 2 CPUs.
func raiseLimits(t testing.TB, n int) {
	t.Helper()
	neigh := 2*n*n + 1024
	raiseSysctl(t, "/proc/sys/net/ipv4/neigh/default/gc_thresh3", neigh)
	raiseSysctl(t, "/proc/sys/net/ipv4/neigh/default/gc_thresh2", neigh/2)
	raiseSysctl(t, "/proc/sys/net/core/netdev_max_backlog", 200*n)
}

// raiseSysctl raises the number in file to at least v, and puts it back
// at the test's end. Nets do not overlap (netns.Lock), so one Net's
// cleanup does not undo another's raise.
func raiseSysctl(t testing.TB, file string, v int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	was := strings.TrimSpace(string(b))
	if cur, err := strconv.Atoi(was); err == nil && cur >= v {
		return
	}
	if err := os.WriteFile(file, []byte(strconv.Itoa(v)), 0o644); err != nil {
		t.Fatalf("raise %s to %d: %v", file, v, err)
	}
	t.Cleanup(func() { os.WriteFile(file, []byte(was), 0o644) })
}
