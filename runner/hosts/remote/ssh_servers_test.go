package remote_test

// SSH as OpenSSH users have it (issue 12), each behaviour against a real
// server in the harness started by TestSSH: host and user certificates,
// ProxyCommand, IdentityFile and IdentitiesOnly, passphrases, hashed and
// port-less known_hosts, MaxSessions, MaxStartups, keepalives from
// ssh_config, gssapi-only hosts and Dropbear.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testhosts"
)

// writeFile writes a test file and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pubLine is a public key file's "type base64" without its comment.
func pubLine(t *testing.T, path string) string {
	f := strings.Fields(readFile(t, path))
	return f[0] + " " + f[1]
}

// noDeleteAdvice fails when a refusal tells the user to delete lines:
// for a CA, a revoked key or a certificate that is harmful.
func noDeleteAdvice(t *testing.T, err error) {
	t.Helper()
	if m := err.Error(); strings.Contains(m, "CHANGED") || strings.Contains(m, "remove") || strings.Contains(m, "ssh-keygen -R") {
		t.Errorf("refusal gives the changed-key advice: %v", err)
	}
}

func testHostCert(t *testing.T, n *testhosts.Net) {
	h := n.Hosts["cert"]
	caLine := pubLine(t, n.HostCAKey+".pub")
	prefix := h.Addr[:strings.LastIndex(h.Addr, ".")+1]
	cfg := config(t, n, h)

	// Only the CA is known, for a pattern: the host's certificate is
	// offered (the certificate algorithms negotiated) and accepted.
	cfg.KnownHosts = writeFile(t, "known_hosts", "@cert-authority "+prefix+"* "+caLine+"\n")
	if got := serverAddr(t, dial(t, cfg)); got != h.Addr {
		t.Errorf("reached %s", got)
	}
	// The CA line in the global file (GlobalKnownHostsFile, as sites do),
	// the plan's file empty: both are read.
	global := writeFile(t, "ssh_known_hosts", "@cert-authority "+prefix+"* "+caLine+"\n")
	cfg.KnownHosts = writeFile(t, "known_hosts", "")
	cfg.ConfigFile = writeFile(t, "config", "GlobalKnownHostsFile "+global+"\n")
	dial(t, cfg)
	cfg.ConfigFile = config(t, n, h).ConfigFile

	refused := func(known string, want remote.CertProblem, words ...string) {
		t.Helper()
		cfg.KnownHosts = writeFile(t, "known_hosts", known)
		err := dialErr(t, cfg)
		var ce *remote.HostCertError
		if !errors.As(err, &ce) || ce.Problem != want || !errors.Is(err, remote.ErrHostKey) {
			t.Fatalf("got %v, want a HostCertError with problem %d", err, want)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v does not say %q", err, w)
			}
		}
		noDeleteAdvice(t, err)
	}
	// Another CA.
	other := filepath.Join(t.TempDir(), "other_ca")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	refused("@cert-authority "+prefix+"* "+pubLine(t, other+".pub")+"\n", remote.CertUnknownCA, "unknown CA")
	// A certificate for another name.
	h.SignHostCert(t, []string{"login.cluster.example"}, "always:forever")
	refused("@cert-authority "+prefix+"* "+caLine+"\n", remote.CertWrongPrincipal, "login.cluster.example", h.Addr)
	// An expired certificate.
	h.SignHostCert(t, []string{h.Addr}, "-2d:-1d")
	refused("@cert-authority "+prefix+"* "+caLine+"\n", remote.CertExpired, "EXPIRED")
	h.SignHostCert(t, []string{h.Addr}, "always:forever")

	// A revoked CA: REVOKED, naming the line, under every policy.
	known := "@cert-authority " + prefix + "* " + caLine + "\n@revoked * " + caLine + "\n"
	for _, policy := range []string{"strict", "accept-new"} {
		cfg.HostKeyPolicy = policy
		cfg.KnownHosts = writeFile(t, "known_hosts", known)
		err := dialErr(t, cfg)
		var re *remote.RevokedHostKeyError
		if !errors.As(err, &re) || !re.CA || !strings.Contains(err.Error(), "REVOKED") || !strings.Contains(err.Error(), cfg.KnownHosts+":2") {
			t.Errorf("%s: revoked CA gave %v", policy, err)
		}
		noDeleteAdvice(t, err)
		if readFile(t, cfg.KnownHosts) != known {
			t.Errorf("%s: known_hosts changed after a revoked CA", policy)
		}
	}
}

func testRevokedKey(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	key := pubLine(t, a.HostKeyFiles[0])
	cfg := config(t, n, a)
	cfg.KnownHosts = writeFile(t, "known_hosts", a.Addr+" "+key+"\n# revoked after the break-in\n@revoked * "+key+"\n")
	err := dialErr(t, cfg)
	var re *remote.RevokedHostKeyError
	if !errors.As(err, &re) || re.CA || !strings.Contains(err.Error(), "REVOKED") || !strings.Contains(err.Error(), cfg.KnownHosts+":3") {
		t.Errorf("revoked host key gave %v, want REVOKED naming line 3", err)
	}
	noDeleteAdvice(t, err)
}

func testUserCert(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	cfg := config(t, n, a)
	cfg.User = n.CertUser

	// KEY-cert.pub beside the identity file, as ssh finds it.
	cfg.IdentityFile = n.SignUserCert(t, t.TempDir(), []string{n.CertUser}, "-5m:+1h")
	s := dial(t, cfg)
	if out, err := s.Run(context.Background(), []string{"id", "-un"}); err != nil || string(out) != n.CertUser+"\n" {
		t.Errorf("logged in with a certificate as %q, %v", out, err)
	}
	// The account takes no plain key: without the certificate, refused.
	bare := filepath.Join(t.TempDir(), "bare")
	os.Link(cfg.IdentityFile, bare)
	noCert := cfg
	noCert.IdentityFile = bare
	if err := dialErr(t, noCert); !errors.Is(err, remote.ErrAuth) {
		t.Errorf("certificate-only account without the certificate: %v", err)
	}
	// CertificateFile in ssh_config, the certificate elsewhere.
	moved := filepath.Join(t.TempDir(), "site-cert.pub")
	os.Rename(cfg.IdentityFile+"-cert.pub", moved)
	viaConfig := cfg
	viaConfig.IdentityFile = ""
	viaConfig.ConfigFile = writeFile(t, "config", fmt.Sprintf("Host %s\n  IdentityFile %s\n  CertificateFile %s\n", a.Addr, cfg.IdentityFile, moved))
	dial(t, viaConfig)

	// Refused certificates: the hint says why.
	for _, c := range []struct {
		principals []string
		validity   string
		says       string
	}{
		{[]string{n.CertUser}, "-2d:-1d", "EXPIRED"},
		{[]string{"someoneelse"}, "-5m:+1h", "not valid for the user " + n.CertUser},
	} {
		bad := cfg
		bad.IdentityFile = n.SignUserCert(t, t.TempDir(), c.principals, c.validity)
		err := dialErr(t, bad)
		var ae *remote.AuthError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.says) || !strings.Contains(ae.Hint(), "certificate") {
			t.Errorf("certificate %v %s: %v, want it to say %q", c.principals, c.validity, err, c.says)
		}
	}
}

func testProxyCommand(t *testing.T, n *testhosts.Net) {
	inner, bastion := n.Hosts["inner"], n.Hosts["bastion"]
	// A login node with a ControlMaster: the proxy's own ssh can log in
	// only through the master (no key of its own), as with MFA.
	dir := t.TempDir()
	control := filepath.Join(dir, "cm")
	proxyCfg := writeFile(t, "proxy_config", fmt.Sprintf(`Host login
  HostName %s
  User root
  IdentityFile /nonexistent
  IdentitiesOnly yes
  BatchMode yes
  UserKnownHostsFile %s
  ControlPath %s
`, bastion.Addr, n.KnownHosts, control))
	master := exec.Command("ssh", "-F", proxyCfg, "-i", n.KeyFile, "-o", "ControlMaster=yes", "-o", "ControlPersist=yes", "-N", "-f", "login")
	if out, err := master.CombinedOutput(); err != nil {
		t.Fatalf("start the ControlMaster: %v: %s", err, out)
	}
	defer exec.Command("ssh", "-F", proxyCfg, "-O", "exit", "login").Run()
	// %r and %n reach the command as ssh expands them.
	tokens := filepath.Join(dir, "tokens")
	cfgFile := writeFile(t, "config", fmt.Sprintf(`Host via-master
  HostName %[1]s
  User root
  IdentityFile %[2]s
  ProxyCommand sh -c 'echo "%%r %%n %%%%" > %[5]s; exec ssh -F %[3]s -W %%h:%%p login'
Host via-nc
  HostName %[1]s
  User root
  IdentityFile %[2]s
  ProxyCommand ssh -F %[4]s bastion nc %%h %%p
Host broken
  HostName %[1]s
  User root
  IdentityFile %[2]s
  ProxyCommand echo "proxy says no" >&2; exit 1
Host none-wins
  HostName %[1]s
  User root
  IdentityFile %[2]s
  ProxyCommand none
Host *
  ProxyJump bastion
`, inner.Addr, n.KeyFile, proxyCfg, n.SSHConfig, tokens))
	for _, alias := range []string{"via-master", "via-nc"} {
		s := dial(t, remote.SSHConfig{Address: alias, KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
			ConnectTimeout: 10 * time.Second, ConfigFile: cfgFile})
		if got := serverAddr(t, s); got != inner.Addr {
			t.Errorf("%s reached %s, want %s (reachable only through the proxy)", alias, got, inner.Addr)
		}
		// A second connection (as MaxSessions would need) runs it again.
		if _, err := s.Upload(context.Background(), n.KeyFile+".pub", testhosts.DeployDir+"/via-"+alias+"/node"); err != nil {
			t.Errorf("upload through %s: %v", alias, err)
		}
		s.Close()
	}
	if got := strings.TrimSpace(readFile(t, tokens)); got != "root via-master %" {
		t.Errorf("ProxyCommand tokens expanded to %q, want %q", got, "root via-master %")
	}
	err := dialErr(t, remote.SSHConfig{Address: "broken", KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
		ConnectTimeout: 5 * time.Second, ConfigFile: cfgFile})
	if !strings.Contains(err.Error(), "proxy says no") || !strings.Contains(err.Error(), "ProxyCommand") {
		t.Errorf("a failing ProxyCommand: %v, want its stderr and name", err)
	}
	// ProxyCommand none came first, so the later ProxyJump is ignored and
	// the dial goes direct, where inner cannot be reached.
	err = dialErr(t, remote.SSHConfig{Address: "none-wins", KnownHosts: n.KnownHosts, HostKeyPolicy: "strict",
		ConnectTimeout: 2 * time.Second, ConfigFile: cfgFile})
	if errors.Is(err, remote.ErrAuth) || errors.Is(err, remote.ErrHostKey) || !strings.Contains(err.Error(), "connect to "+inner.Addr) {
		t.Errorf("ProxyCommand none then ProxyJump: %v, want a direct connect that fails", err)
	}
	// Nothing of the proxies is left running.
	time.Sleep(300 * time.Millisecond)
	if out, _ := exec.Command("pgrep", "-f", "-W "+inner.Addr).Output(); len(out) > 0 {
		t.Errorf("proxy commands left running: %s", out)
	}
}

func testMissingIdentity(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	var debug []string
	var mu sync.Mutex
	cfg := remote.SSHConfig{Address: "x", KnownHosts: n.KnownHosts, HostKeyPolicy: "strict", ConnectTimeout: 5 * time.Second,
		ConfigFile: writeFile(t, "config", fmt.Sprintf("Host x\n  HostName %s\n  User root\n  IdentityFile /nonexistent/id_ed25519\n  IdentityFile %s\n", a.Addr, n.KeyFile)),
		Debug:      func(m string) { mu.Lock(); debug = append(debug, m); mu.Unlock() }}
	dial(t, cfg)
	if !strings.Contains(strings.Join(debug, "\n"), "/nonexistent/id_ed25519: not there, skipped") {
		t.Errorf("debug did not say the missing identity file was skipped: %q", debug)
	}
	cfg.ConfigFile = writeFile(t, "config", fmt.Sprintf("Host x\n  HostName %s\n  User root\n  IdentityFile /nonexistent/id_ed25519\n", a.Addr))
	if err := dialErr(t, cfg); !strings.Contains(err.Error(), "no key to log in with") || !strings.Contains(err.Error(), "/nonexistent/id_ed25519") {
		t.Errorf("only a missing identity file: %v", err)
	}
}

// startAgent serves an in-process ssh-agent holding keys on a socket and
// points SSH_AUTH_SOCK at it.
func startAgent(t *testing.T, keys ...any) {
	t.Helper()
	kr := agent.NewKeyring()
	for _, k := range keys {
		if err := kr.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(kr, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
}

func randomKeys(k int) []any {
	var out []any
	for i := 0; i < k; i++ {
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		out = append(out, priv)
	}
	return out
}

// Host b allows 3 authentication attempts. An agent with 6 other keys is
// asked first (as ssh asks it), so the right identity file never gets its
// turn, unless IdentitiesOnly yes.
func testIdentitiesOnly(t *testing.T, n *testhosts.Net) {
	b := n.Hosts["b"]
	startAgent(t, randomKeys(6)...)
	cfg := remote.SSHConfig{Address: "b", KnownHosts: n.KnownHosts, HostKeyPolicy: "strict", ConnectTimeout: 5 * time.Second,
		ConfigFile: writeFile(t, "config", fmt.Sprintf("Host b\n  HostName %s\n  User root\n  IdentityFile %s\n", b.Addr, n.KeyFile))}
	err := dialErr(t, cfg)
	var ae *remote.AuthError
	if !errors.As(err, &ae) || !ae.CutShort || !strings.Contains(err.Error(), "MaxAuthTries") ||
		!strings.Contains(ae.Hint(), "IdentitiesOnly yes") {
		t.Errorf("agent with 6 keys against MaxAuthTries 3: %v, want a cut-short login naming MaxAuthTries with an IdentitiesOnly hint", err)
	}
	// OpenSSH agrees it cannot log in this way.
	if out, err := exec.Command("ssh", "-F", cfg.ConfigFile, "-o", "BatchMode=yes", "-o", "UserKnownHostsFile="+n.KnownHosts, "b", "true").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "Too many authentication failures") {
		t.Errorf("OpenSSH with the same agent: %v: %s", err, out)
	}
	cfg.ConfigFile = writeFile(t, "config", fmt.Sprintf("Host b\n  HostName %s\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n", b.Addr, n.KeyFile))
	dial(t, cfg)
}

func testPassphraseKeys(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	// The harness key, re-encrypted: the host accepts it.
	protected := filepath.Join(t.TempDir(), "id_ed25519")
	b, _ := os.ReadFile(n.KeyFile)
	os.WriteFile(protected, b, 0o600)
	if out, err := exec.Command("ssh-keygen", "-q", "-p", "-N", "sesame", "-f", protected).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cfg := config(t, n, a)
	cfg.IdentityFile = protected

	// An agent runs but lacks the key, and there is no terminal: an
	// error naming the key and ssh-add, not a silent drop.
	startAgent(t, randomKeys(1)...)
	err := dialErr(t, cfg)
	if !errors.Is(err, remote.ErrAuth) || !strings.Contains(err.Error(), "ssh-add "+protected) {
		t.Errorf("agent without the key, no terminal: %v, want the key named with ssh-add", err)
	}

	// A terminal: asked once for the key, however many dials use it.
	var asked []string
	var mu sync.Mutex
	cfg.Passphrase = func(key string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, key)
		return []byte("sesame"), nil
	}
	dial(t, cfg)
	dial(t, cfg)
	if len(asked) != 1 || asked[0] != protected {
		t.Errorf("asked for %q, want once for %s", asked, protected)
	}

	// The agent holds it: nothing is asked.
	priv, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, priv)
	again := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(again, readFileBytes(t, protected), 0o600)
	cfg.IdentityFile = again
	cfg.Passphrase = func(key string) ([]byte, error) {
		t.Errorf("asked for %s although ssh-agent holds it", key)
		return nil, errors.New("no")
	}
	dial(t, cfg)
}

func readFileBytes(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testHashKnownHosts(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	cfg := config(t, n, a)
	cfg.KnownHosts = writeFile(t, "known_hosts", "")
	cfg.HostKeyPolicy = "accept-new"
	cfg.ConfigFile = writeFile(t, "config", "HashKnownHosts yes\n")
	dial(t, cfg)
	kh := readFile(t, cfg.KnownHosts)
	if !strings.HasPrefix(kh, "|1|") || strings.Contains(kh, a.Addr) {
		t.Errorf("accept-new under HashKnownHosts yes wrote %q, want a hashed line", kh)
	}
	// OpenSSH finds the host in it, and strict now accepts it.
	if out, err := exec.Command("ssh-keygen", "-F", a.Addr, "-f", cfg.KnownHosts).CombinedOutput(); err != nil || !strings.Contains(string(out), "ssh-ed25519") {
		t.Errorf("ssh-keygen -F %s in the hashed file: %v: %s", a.Addr, err, out)
	}
	cfg.HostKeyPolicy = "strict"
	dial(t, cfg)

	// Several UserKnownHostsFile: the second one knows the host.
	cfg.KnownHosts = ""
	cfg.ConfigFile = writeFile(t, "config", "UserKnownHostsFile "+writeFile(t, "empty", "")+" "+n.KnownHosts+"\n")
	dial(t, cfg)
}

// The rsa host listens on 22 and 2222; known_hosts has only port-22
// entries. ssh accepts a matching one on 2222 ("found matching key w/out
// port"). With only its ssh-rsa entry, ssh itself fails (it offers
// ed25519 first and then finds no ed25519 key), and the runner must do
// better: offer the port-22 entry's key types first.
func testPort22Fallback(t *testing.T, n *testhosts.Net) {
	h := n.Hosts["rsa"]
	keys := map[string]string{}
	for _, f := range h.HostKeyFiles {
		k := pubLine(t, f)
		keys[strings.Fields(k)[0]] = k
	}
	cfg := config(t, n, h)
	cfg.Port = 2222
	cfg.KnownHosts = writeFile(t, "known_hosts", h.Addr+" "+keys["ssh-ed25519"]+"\n")
	if out, err := exec.Command("ssh", "-F", "none", "-p", "2222", "-i", n.KeyFile, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile="+cfg.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null", "root@"+h.Addr, "true").CombinedOutput(); err != nil {
		t.Fatalf("OpenSSH on port 2222 with a port-22 entry: %v: %s", err, out)
	}
	s := dial(t, cfg)
	if s.Name() != "root@"+h.Addr+":2222" {
		t.Errorf("Name() = %q", s.Name())
	}
	cfg.KnownHosts = writeFile(t, "known_hosts", h.Addr+" "+keys["ssh-rsa"]+"\n")
	dial(t, cfg)
	// A port-22 entry that does not match is "unknown", not "changed".
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	sk, _ := ssh.NewSignerFromKey(other)
	cfg.KnownHosts = writeFile(t, "known_hosts", h.Addr+" "+string(ssh.MarshalAuthorizedKey(sk.PublicKey())))
	var unknown *remote.UnknownHostError
	if err := dialErr(t, cfg); !errors.As(err, &unknown) {
		t.Errorf("non-matching port-22 entry: %v, want an unknown host", err)
	}
}

// runMany starts k sleeping processes, runs a command and uploads a file,
// all at once, on one host, as an exec does with both roles there.
func runMany(t *testing.T, s *remote.SSH, k int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	procs := make([]remote.Process, k)
	errs := make([]error, k+2)
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			procs[i], errs[i] = s.Start(ctx, []string{"sleep", "30"})
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errs[k] = s.Run(ctx, []string{"true"})
	}()
	src := writeFile(t, "node", "#!/bin/sh\n")
	go func() {
		defer wg.Done()
		_, errs[k+1] = s.Upload(ctx, src, testhosts.DeployDir+fmt.Sprintf("/many-%d/node", k))
	}()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: call %d of %d at once: %v", s.Name(), i, k+2, err)
		}
	}
	var ee *remote.ExitError
	for _, p := range procs {
		if p == nil {
			continue
		}
		go io.Copy(io.Discard, p.Stdout())
		go io.Copy(io.Discard, p.Stderr())
		if err := p.Signal(syscall.SIGKILL); err != nil {
			t.Errorf("kill: %v", err)
		}
		if err := p.Wait(); !errors.As(err, &ee) || ee.Signal != "KILL" {
			t.Errorf("Wait after kill: %v", err)
		}
	}
}

func testMaxSessions(t *testing.T, n *testhosts.Net) {
	for _, c := range []struct {
		host string
		k    int
	}{{"one", 2}, {"two", 4}} {
		s := dial(t, config(t, n, n.Hosts[c.host]))
		runMany(t, s, c.k)
		if s.Conns() < 2 {
			t.Errorf("%s: %d connection(s); the limit should have needed more", c.host, s.Conns())
		}
		t.Logf("%s: %d processes, a run and an upload at once over %d connections", c.host, c.k, s.Conns())
	}
	// MaxSessions 0: no connection gives a session. The error names it.
	s := dial(t, config(t, n, n.Hosts["nosess"]))
	_, err := s.Run(context.Background(), []string{"true"})
	var se *remote.SessionLimitError
	if !errors.Is(err, remote.ErrSessionLimit) || !errors.As(err, &se) || !strings.Contains(se.Hint(), "MaxSessions") {
		t.Errorf("MaxSessions 0: %v, want a SessionLimitError naming MaxSessions", err)
	}
}

func testMaxStartups(t *testing.T, n *testhosts.Net) {
	busy := n.Hosts["busy"]
	const k = 8
	var retries, failed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := config(t, n, busy)
			cfg.ConnectTimeout = 20 * time.Second
			cfg.Debug = func(m string) {
				if strings.Contains(m, "closed before the key exchange") {
					mu.Lock()
					retries++
					mu.Unlock()
				}
			}
			s, err := remote.DialSSH(context.Background(), cfg)
			if err != nil {
				mu.Lock()
				failed++
				mu.Unlock()
				t.Errorf("dial %d of %d at once to a MaxStartups 1:100:1 host: %v", i, k, err)
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	t.Logf("%d dials at once: %d handshakes closed early and retried, %d failed", k, retries, failed)
	if retries == 0 {
		t.Errorf("no handshake was closed early: the host does not enforce MaxStartups, and this test proves nothing")
	}

	// One unauthenticated connection held open fills MaxStartups 1: every
	// dial is dropped until the timeout, and the error names the limit.
	var hold net.Conn
	for deadline := time.Now().Add(10 * time.Second); hold == nil; {
		c, err := net.Dial("tcp", net.JoinHostPort(busy.Addr, "22"))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(c, buf); err == nil && string(buf) == "SSH-" {
			hold = c // a banner: this connection has the slot
			break
		}
		c.Close() // dropped: the slot was still counted for an earlier one
		if time.Now().After(deadline) {
			t.Fatal("could not take the host's one unauthenticated slot in 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer hold.Close()
	cfg := config(t, n, busy)
	cfg.ConnectTimeout = 1500 * time.Millisecond
	err := dialErr(t, cfg)
	var me *remote.MaxStartupsError
	if !errors.Is(err, remote.ErrMaxStartups) || !errors.As(err, &me) || me.Attempts < 2 || !strings.Contains(me.Hint(), "MaxStartups") {
		t.Errorf("MaxStartups full: %v, want a MaxStartupsError after retries", err)
	}
}

// The keepalive from ssh_config (the plan silent): ServerAliveInterval 1,
// ServerAliveCountMax 2 detect a silent link within 2 s.
func testKeepaliveSSHConfig(t *testing.T, n *testhosts.Net) {
	b := n.Hosts["b"]
	cfg := config(t, n, b)
	cfg.ConfigFile = writeFile(t, "config", "ServerAliveInterval 1\nServerAliveCountMax 2\n")
	s := dial(t, cfg)
	p, err := s.Start(context.Background(), []string{"sleep", "60"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	time.Sleep(2500 * time.Millisecond) // answered keepalives keep it up
	b.Blackhole(t)
	defer b.Unblackhole(t)
	start := time.Now()
	err = p.Wait()
	el := time.Since(start)
	var ke *remote.KeepaliveError
	if !errors.As(err, &ke) || ke.Interval != time.Second || ke.Count != 2 || !strings.Contains(err.Error(), "keepalive interval 1s × count 2") {
		t.Errorf("Wait after the link went silent: %v", err)
	}
	// Within interval × count of the last answer, which came before the
	// silence began; slack is for a loaded machine.
	if bound := 2*time.Second + slack; el > bound {
		t.Errorf("silence detected after %v, want within %v (interval × count + slack)", el, bound)
	}
	t.Logf("silence detected after %v (ServerAliveInterval 1 × ServerAliveCountMax 2)", el.Round(10*time.Millisecond))
}

func testGSSAPIOnly(t *testing.T, n *testhosts.Net) {
	err := dialErr(t, config(t, n, n.Hosts["gss"]))
	var ae *remote.AuthError
	if !errors.As(err, &ae) || !ae.GSSAPIOnly || !strings.Contains(err.Error(), "gssapi-with-mic") {
		t.Errorf("a host offering only gssapi-with-mic: %v, want an error naming it", err)
	}
}

func testDropbear(t *testing.T, n *testhosts.Net) {
	h := n.Hosts["dropbear"]
	s := dial(t, config(t, n, h))
	ctx := context.Background()
	out, err := s.Run(ctx, []string{"sh", "-c", `echo "$SSH_CONNECTION"`})
	if err != nil || !strings.Contains(string(out), h.Addr) {
		t.Fatalf("Run on dropbear: %q, %v", out, err)
	}
	if _, err := s.Run(ctx, []string{"sh", "-c", "exit 3"}); err == nil {
		t.Errorf("exit 3 on dropbear gave no error")
	}
	// A cancelled Run's command is killed, though Dropbear does not make
	// the shell that runs it (ssh_shell.go) lead a process group.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	s.Run(cctx, []string{"sh", "-c", "echo $$ > /var/tmp/dropbear-cancel.pid; exec sleep 60"})
	cancel()
	pid := strings.TrimSpace(h.Run(t, "cat", "/var/tmp/dropbear-cancel.pid"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := strings.TrimSpace(h.Run(t, "sh", "-c", `cut -d' ' -f3 /proc/$1/stat 2>/dev/null; :`, "sh", pid))
		if st == "" || st == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("cancelled Run's command (pid %s) on dropbear still there, state %s", pid, st)
			break
		}
	}
	data := make([]byte, 1<<20)
	rand.Read(data)
	src := filepath.Join(t.TempDir(), "node")
	os.WriteFile(src, data, 0o644)
	target := testhosts.DeployDir + "/dropbear/node"
	if res, err := s.Upload(ctx, src, target); err != nil || res.BytesSent != int64(len(data)) {
		t.Fatalf("upload to dropbear (OpenSSH's sftp-server): %+v, %v", res, err)
	}
	sum := sha256.Sum256(data)
	if got := h.Run(t, "sha256sum", target); !strings.HasPrefix(got, hex.EncodeToString(sum[:])) {
		t.Errorf("uploaded file on dropbear: %s", got)
	}
	p, err := s.Start(ctx, []string{"sleep", "30"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("kill on dropbear: %v", err)
	}
	if err := p.Wait(); err == nil {
		t.Errorf("killed process on dropbear exited cleanly")
	}
}
