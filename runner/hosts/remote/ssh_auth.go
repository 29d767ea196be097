package remote

// Keys are gathered as ssh(1) gathers them (sshconnect2.c, pubkey_prepare):
//
//   - the identity files are the plan's identity_file, else ssh_config's
//     IdentityFile lines, else the defaults ~/.ssh/id_rsa, id_ecdsa,
//     id_ecdsa_sk, id_ed25519, id_ed25519_sk, id_xmss, id_dsa; a file
//     that does not exist is skipped (said at debug), and it is an error
//     only when no key at all remains;
//   - beside each, KEY-cert.pub is offered as a certificate first, and
//     every CertificateFile is paired with the identity (file or agent)
//     whose public key it certifies;
//   - ssh-agent's keys follow (with IdentitiesOnly yes, only those that are
//     also identity files);
//   - a passphrase-protected file the agent does not hold is offered by its
//     public key, and its passphrase is asked for (once per key, on the
//     terminal) only when the server would accept it; with no terminal it
//     is not offered, and the authentication error says to `ssh-add` it.
//
// The runner never prints: it asks through SSHConfig.Passphrase and says
// things through SSHConfig.Debug.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/term"
)

// ErrAuth is wrapped when the host accepted none of our keys.
var ErrAuth = errors.New("authentication failed")

// defaultIdentities are ssh's, in its order, used only when no
// IdentityFile is given.
var defaultIdentities = []string{"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
	"~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa"}

// keyring is the keys to offer, in order, and what was tried, for messages.
type keyring struct {
	signers []ssh.Signer
	tried   []string // "FILE", "FILE (certificate)" or "ssh-agent (N keys)"
	certs   []offeredCert
	// protected are passphrase keys not offered: no terminal to ask on.
	protected []string
	agent     net.Conn // closed after the handshake
	trace     *authTrace
}

// offeredCert is a user certificate offered, for the refusal's hint.
type offeredCert struct {
	file string
	cert *ssh.Certificate
}

func (k *keyring) close() {
	if k.agent != nil {
		k.agent.Close()
		k.agent = nil
	}
}

// keyOptions is what loadKeys needs from the resolved configuration.
type keyOptions struct {
	identities     []string // expanded paths; explicit when written
	certificates   []string // CertificateFile, expanded
	identitiesOnly bool
	passphrase     func(keyFile string) ([]byte, error) // nil: no terminal
	debug          func(string)
}

// loadKeys gathers the keys to offer; see the file comment.
func loadKeys(o keyOptions) (*keyring, error) {
	l := &keyLoader{o: o, debug: o.debug, k: &keyring{trace: &authTrace{offered: map[int]bool{}}}}
	if l.debug == nil {
		l.debug = func(string) {}
	}
	l.openAgent()
	for _, path := range o.identities {
		if err := l.readIdentity(path); err != nil {
			return nil, err
		}
	}
	l.addCertificates()
	l.addAgentKeys()
	return l.finish()
}

// keyLoader is one loadKeys: the keyring it fills, the agent's keys and
// the identity files read so far.
type keyLoader struct {
	o            keyOptions
	debug        func(string)
	k            *keyring
	agentSigners []ssh.Signer
	files        []identityKey
}

// identityKey is one identity file's key.
type identityKey struct {
	path   string
	signer ssh.Signer // nil when the agent holds it
	pub    ssh.PublicKey
}

// openAgent takes the keys of the ssh-agent at SSH_AUTH_SOCK, if one
// answers with any.
func (l *keyLoader) openAgent() {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		l.debug(fmt.Sprintf("ssh-agent at SSH_AUTH_SOCK=%s: %v", sock, err))
		return
	}
	s, err := agent.NewClient(c).Signers()
	if err == nil && len(s) > 0 {
		l.k.agent = c
		l.agentSigners = s
	} else {
		c.Close()
	}
}

func (l *keyLoader) inAgent(pub ssh.PublicKey) bool {
	for _, s := range l.agentSigners {
		if keysEqual(s.PublicKey(), pub) {
			return true
		}
	}
	return false
}

// readIdentity adds the identity file at path: skipped when missing or
// unloadable (as ssh does), left to the agent when it holds the key.
func (l *keyLoader) readIdentity(path string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		l.debug(fmt.Sprintf("identity file %s: not there, skipped", path))
		return nil
	}
	if err != nil {
		return fmt.Errorf("read identity file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	var pe *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &pe):
		return l.readProtected(path, b, pe.PublicKey)
	case err != nil:
		// ssh skips keys it cannot load (an sk or xmss key, say).
		l.debug(fmt.Sprintf("identity file %s: %v; skipped", path, err))
		return nil
	}
	if l.inAgent(signer.PublicKey()) {
		l.files = append(l.files, identityKey{path: path, pub: signer.PublicKey()})
		return nil
	}
	l.files = append(l.files, identityKey{path: path, signer: signer, pub: signer.PublicKey()})
	return nil
}

// readProtected adds a passphrase-protected identity file: the agent's
// copy, or one unlocked when first used (at once when there is no public
// half to offer first), or none when there is no terminal to ask on.
func (l *keyLoader) readProtected(path string, pem []byte, pub ssh.PublicKey) error {
	if pub == nil {
		pub = readPublicKey(path + ".pub")
	}
	switch {
	case pub != nil && l.inAgent(pub):
		l.debug(fmt.Sprintf("identity file %s: protected by a passphrase; ssh-agent holds it", path))
		l.files = append(l.files, identityKey{path: path, pub: pub})
	case l.o.passphrase == nil:
		l.debug(fmt.Sprintf("identity file %s: protected by a passphrase, not in ssh-agent, and no terminal to ask on: not offered", path))
		l.k.protected = append(l.k.protected, path)
	case pub == nil:
		// No public half to offer first: ask now.
		s, err := unlock(path, pem, l.o.passphrase)
		if err != nil {
			return err
		}
		l.files = append(l.files, identityKey{path: path, signer: s, pub: s.PublicKey()})
	default:
		l.files = append(l.files, identityKey{path: path, signer: &lockedSigner{path: path, pem: pem, pub: pub, ask: l.o.passphrase, trace: l.k.trace}, pub: pub})
	}
	return nil
}

// addCertificates offers the certificates: CertificateFile's, then
// KEY-cert.pub beside each identity, each with the key it certifies.
func (l *keyLoader) addCertificates() {
	for _, path := range l.o.certificates {
		cert, ok := readPublicKey(path).(*ssh.Certificate)
		if !ok {
			l.debug(fmt.Sprintf("certificate file %s: missing or not a certificate; skipped", path))
			continue
		}
		s := l.signerFor(cert.Key)
		if s == nil {
			l.debug(fmt.Sprintf("certificate file %s: no identity or agent key for it; skipped", path))
			continue
		}
		l.addCert(path, cert, s)
	}
	for _, f := range l.files {
		if cert, ok := readPublicKey(f.path + "-cert.pub").(*ssh.Certificate); ok {
			if s := l.signerFor(f.pub); s != nil {
				l.addCert(f.path+"-cert.pub", cert, s)
			}
		}
	}
}

func (l *keyLoader) addCert(file string, cert *ssh.Certificate, s ssh.Signer) {
	cs, err := ssh.NewCertSigner(cert, s)
	if err != nil {
		l.debug(fmt.Sprintf("certificate %s: %v", file, err))
		return
	}
	l.k.signers = append(l.k.signers, cs)
	l.k.tried = append(l.k.tried, file+" (certificate)")
	l.k.certs = append(l.k.certs, offeredCert{file: file, cert: cert})
}

// signerFor is the identity file's or agent's signer for pub, or nil.
func (l *keyLoader) signerFor(pub ssh.PublicKey) ssh.Signer {
	for _, f := range l.files {
		if f.signer != nil && keysEqual(f.pub, pub) {
			return f.signer
		}
	}
	for _, s := range l.agentSigners {
		if keysEqual(s.PublicKey(), pub) {
			return s
		}
	}
	return nil
}

// addAgentKeys offers the agent's keys: those matching identity files
// first, as ssh does, then the rest (under IdentitiesOnly, only an agent
// certificate for a configured key).
func (l *keyLoader) addAgentKeys() {
	var fromAgent int
	for _, want := range l.files {
		for _, s := range l.agentSigners {
			if want.signer == nil && keysEqual(s.PublicKey(), want.pub) {
				l.k.signers = append(l.k.signers, s)
				fromAgent++
			}
		}
	}
	for _, s := range l.agentSigners {
		if l.configured(s.PublicKey()) {
			continue
		}
		if l.o.identitiesOnly {
			cert, isCert := s.PublicKey().(*ssh.Certificate)
			if !isCert || !l.configured(cert.Key) {
				continue
			}
		}
		l.k.signers = append(l.k.signers, s)
		fromAgent++
	}
	if fromAgent > 0 {
		l.k.tried = append(l.k.tried, fmt.Sprintf("ssh-agent (%d keys)", fromAgent))
	}
}

// configured says whether pub is an identity file's key.
func (l *keyLoader) configured(pub ssh.PublicKey) bool {
	for _, f := range l.files {
		if keysEqual(pub, f.pub) {
			return true
		}
	}
	return false
}

// finish offers the identity files' own keys last and traces every
// signer, or fails when there is nothing to offer.
func (l *keyLoader) finish() (*keyring, error) {
	k := l.k
	for _, f := range l.files {
		if f.signer != nil {
			k.signers = append(k.signers, f.signer)
			k.tried = append(k.tried, f.path)
		}
	}
	if len(k.signers) == 0 {
		k.close()
		if len(k.protected) > 0 {
			return nil, &PassphraseError{Keys: k.protected}
		}
		return nil, fmt.Errorf("no key to log in with (tried %s): set identity_file in the plan, run ssh-agent, or create ~/.ssh/id_ed25519",
			strings.Join(l.o.identities, ", "))
	}
	for i, s := range k.signers {
		k.signers[i] = &tracedSigner{Signer: s, i: i, trace: k.trace}
	}
	k.trace.total = len(k.signers)
	return k, nil
}

// readPublicKey reads an authorized_keys-format file (KEY.pub,
// KEY-cert.pub), or returns nil.
func readPublicKey(path string) ssh.PublicKey {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil
	}
	return pub
}

// PassphraseError is passphrase-protected keys that could not be used:
// ssh-agent does not hold them and there is no terminal to ask on.
type PassphraseError struct{ Keys []string }

func (e *PassphraseError) Error() string {
	return fmt.Sprintf("identity file %s is protected by a passphrase, ssh-agent does not hold it, and there is no terminal to ask on: load it with `ssh-add %s`",
		strings.Join(e.Keys, ", "), e.Keys[0])
}

func (e *PassphraseError) Hint() string {
	return "start ssh-agent if none runs (eval $(ssh-agent)), then: ssh-add " + strings.Join(e.Keys, " ")
}

// passphrases remembers keys already unlocked, so each is asked for once
// per process, however many hosts use it; askMu keeps two dials from
// prompting at once.
var (
	askMu    sync.Mutex
	unlocked = map[string]ssh.Signer{}
)

// unlock asks for path's passphrase (up to three times, as ssh) and parses
// the key with it.
func unlock(path string, pemBytes []byte, ask func(string) ([]byte, error)) (ssh.Signer, error) {
	askMu.Lock()
	defer askMu.Unlock()
	if s, ok := unlocked[path]; ok {
		return s, nil
	}
	for try := 1; ; try++ {
		pass, err := ask(path)
		if err != nil {
			return nil, fmt.Errorf("passphrase for %s: %w", path, err)
		}
		s, err := ssh.ParsePrivateKeyWithPassphrase(pemBytes, pass)
		if err == nil {
			unlocked[path] = s
			return s, nil
		}
		if try == 3 {
			return nil, fmt.Errorf("identity file %s: no good passphrase in 3 tries: %w", path, err)
		}
	}
}

// lockedSigner is a passphrase-protected key offered by its public half;
// the passphrase is asked for when the server accepts the key and a
// signature is needed, as ssh does.
type lockedSigner struct {
	path  string
	pem   []byte
	pub   ssh.PublicKey
	ask   func(string) ([]byte, error)
	trace *authTrace
}

func (s *lockedSigner) PublicKey() ssh.PublicKey { return s.pub }

func (s *lockedSigner) Sign(r io.Reader, data []byte) (*ssh.Signature, error) {
	return s.SignWithAlgorithm(r, data, "")
}

func (s *lockedSigner) SignWithAlgorithm(r io.Reader, data []byte, algo string) (*ssh.Signature, error) {
	inner, err := unlock(s.path, s.pem, s.ask)
	if err != nil {
		if s.trace != nil {
			s.trace.mu.Lock()
			s.trace.signErr = err
			s.trace.mu.Unlock()
		}
		return nil, err
	}
	if as, ok := inner.(ssh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(r, data, algo)
	}
	return inner.Sign(r, data)
}

// authTrace records how authentication went, so a failure can be told
// apart without reading the library's error strings: which keys the
// server was asked about, and what else it offered.
type authTrace struct {
	mu      sync.Mutex
	offered map[int]bool // signer indexes the server was asked about
	total   int
	gssapi  bool  // the server offered gssapi-with-mic
	signErr error // a key the server accepted could not sign (passphrase)
}

func (t *authTrace) saw(i int) {
	t.mu.Lock()
	t.offered[i] = true
	t.mu.Unlock()
}

// tracedSigner records that its key was offered. It is an AlgorithmSigner
// whatever it wraps, so RSA keys are offered as rsa-sha2-*.
type tracedSigner struct {
	ssh.Signer
	i     int
	trace *authTrace
}

func (s *tracedSigner) PublicKey() ssh.PublicKey {
	s.trace.saw(s.i)
	return s.Signer.PublicKey()
}

func (s *tracedSigner) SignWithAlgorithm(r io.Reader, data []byte, algo string) (*ssh.Signature, error) {
	if as, ok := s.Signer.(ssh.AlgorithmSigner); ok {
		return as.SignWithAlgorithm(r, data, algo)
	}
	return s.Signer.Sign(r, data)
}

// gssapiProbe is a GSS-API client that only notes the server offered
// gssapi-with-mic: Kerberos login is not supported, and a host that
// offers nothing else deserves an error naming it.
type gssapiProbe struct{ trace *authTrace }

var errNoGSSAPI = errors.New("gssapi-with-mic (Kerberos) authentication is not supported")

func (g gssapiProbe) InitSecContext(string, []byte, bool) ([]byte, bool, error) {
	g.trace.mu.Lock()
	g.trace.gssapi = true
	g.trace.mu.Unlock()
	return nil, false, errNoGSSAPI
}
func (g gssapiProbe) GetMIC([]byte) ([]byte, error) { return nil, errNoGSSAPI }
func (g gssapiProbe) DeleteSecContext() error       { return nil }

// AuthError is a login the host refused. Its message says what was
// offered; Hint says what to try, naming the server's limit or the
// certificate's problem when that is the cause.
type AuthError struct {
	User  string
	Tried []string
	// CutShort: the server ended the login before every key was offered,
	// as sshd's MaxAuthTries does ("Too many authentication failures").
	CutShort       bool
	Offered, Total int
	// GSSAPIOnly: the host offered gssapi-with-mic and not publickey.
	GSSAPIOnly bool
	// NoPublicKey: the host does not take public keys at all.
	NoPublicKey bool
	Protected   []string // passphrase keys not offered (no terminal)
	CertIssues  []string // offered user certificates that cannot work
}

func (e *AuthError) Error() string {
	var b strings.Builder
	switch {
	case e.GSSAPIOnly:
		fmt.Fprintf(&b, "%v as %s: the host offers only gssapi-with-mic (Kerberos), which rdmasweep does not support", ErrAuth, e.User)
	case e.NoPublicKey:
		fmt.Fprintf(&b, "%v as %s: the host does not accept public keys", ErrAuth, e.User)
	case e.CutShort:
		fmt.Fprintf(&b, "%v as %s: the host closed the login after %d of %d keys (Too many authentication failures: its MaxAuthTries) (%s)",
			ErrAuth, e.User, e.Offered, e.Total, strings.Join(e.Tried, ", "))
	default:
		fmt.Fprintf(&b, "%v as %s: the host accepted none of the keys tried (%s)", ErrAuth, e.User, strings.Join(e.Tried, ", "))
	}
	for _, c := range e.CertIssues {
		b.WriteString("; " + c)
	}
	if len(e.Protected) > 0 {
		fmt.Fprintf(&b, "; not offered: %s, protected by a passphrase with no terminal to ask on (load it with `ssh-add %s`)",
			strings.Join(e.Protected, ", "), e.Protected[0])
	}
	return b.String()
}

func (e *AuthError) Unwrap() error { return ErrAuth }

func (e *AuthError) Hint() string {
	switch {
	case e.GSSAPIOnly:
		return "get a key or certificate accepted on the host (or reach it through a login node that takes one: ProxyCommand ssh -W %h:%p login, see docs/ssh.md)"
	case e.CutShort:
		return "ssh-agent offers every key it holds and the server's MaxAuthTries stops the login first: set IdentitiesOnly yes and IdentityFile for this host in ~/.ssh/config, or identity_file in the plan"
	case len(e.CertIssues) > 0:
		return "get a new certificate from your site's CA (e.g. its ssh-keygen -s, or your login tool)"
	case len(e.Protected) > 0:
		return "ssh-add " + strings.Join(e.Protected, " ")
	}
	return "check the user and key with: ssh -v USER@HOST; the key must be in the user's authorized_keys"
}

// certIssues explains offered user certificates that cannot work: expired,
// not yet valid, or without the login user as a principal.
func certIssues(certs []offeredCert, user string, now time.Time) []string {
	var out []string
	unix := uint64(now.Unix())
	for _, c := range certs {
		switch {
		case c.cert.ValidBefore != ssh.CertTimeInfinity && unix >= c.cert.ValidBefore:
			out = append(out, fmt.Sprintf("the certificate %s EXPIRED at %s", c.file, certTime(c.cert.ValidBefore)))
		case unix < c.cert.ValidAfter:
			out = append(out, fmt.Sprintf("the certificate %s is not valid before %s", c.file, certTime(c.cert.ValidAfter)))
		case len(c.cert.ValidPrincipals) > 0 && !contains(c.cert.ValidPrincipals, user):
			out = append(out, fmt.Sprintf("the certificate %s is not valid for the user %s (its principals: %s)", c.file, user, strings.Join(c.cert.ValidPrincipals, ", ")))
		}
	}
	return out
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TerminalPassphrase returns a SSHConfig.Passphrase that asks on the
// controlling terminal (/dev/tty), as ssh does, or nil when there is none
// (under CI, cron, or nohup): protected keys must then be in ssh-agent.
func TerminalPassphrase() func(keyFile string) ([]byte, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	ok := term.IsTerminal(int(tty.Fd()))
	tty.Close()
	if !ok {
		return nil
	}
	return func(keyFile string) ([]byte, error) {
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		defer tty.Close()
		fmt.Fprintf(tty, "Enter passphrase for key '%s': ", keyFile)
		b, err := term.ReadPassword(int(tty.Fd()))
		fmt.Fprintln(tty)
		return b, err
	}
}
