package remote

// Host keys are checked as OpenSSH checks them, from known_hosts files the
// runner reads itself (x/crypto's knownhosts reports every refusal as a
// mismatch and cannot tell an expired certificate from a changed key):
//
//   - the user files (the plan's ssh.known_hosts, else ssh_config's
//     UserKnownHostsFile, else ~/.ssh/known_hosts and known_hosts2) and the
//     global ones (GlobalKnownHostsFile, else /etc/ssh/ssh_known_hosts and
//     ssh_known_hosts2) are all read; accept-new writes to the first user
//     file only, hashed when HashKnownHosts is yes;
//   - a line's hosts field holds patterns (* ? and !negation), hashed
//     names (|1|salt|hash) and [host]:port forms, as sshd(8) describes;
//   - @revoked lines refuse a key, or a certificate signed by that key,
//     under every policy but insecure;
//   - @cert-authority lines make the runner offer the certificate host key
//     algorithms, and a host certificate is checked for its CA, principal
//     and validity window, each refusal with its own error;
//   - on a port other than 22 with no [host]:port entry, the host's port-22
//     entries are used, as ssh does ("found matching key w/out port");
//   - a line that does not parse is skipped, as ssh skips it.

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Host key policies, as written in a plan's ssh.host_key_policy.
const (
	PolicyStrict    = "strict"     // refuse unknown hosts (the default)
	PolicyAcceptNew = "accept-new" // add unknown hosts
	PolicyInsecure  = "insecure"   // check nothing
)

// DefaultGlobalKnownHosts are read when ssh_config sets no
// GlobalKnownHostsFile, as ssh reads them.
var DefaultGlobalKnownHosts = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}

// hostKeys checks host keys against known_hosts files under a policy.
// A changed or revoked key is refused under every policy but insecure.
type hostKeys struct {
	user   []string // read, and the first is where accept-new writes
	global []string // read only
	policy string
	hash   bool // write hashed host names (HashKnownHosts yes)
	// source is what decided the policy (SourcePlan…), and
	// sshConfigValue ssh_config's StrictHostKeyChecking, for a refusal.
	source, sshConfigValue string
	warn                   func(string)
	debug                  func(string)

	mu sync.Mutex // serialises reading and appending the file
}

// newHostKeys checks the policy ("" is strict) and creates the first
// user file (and its directory, 0700) when it is missing and may be
// written to.
func newHostKeys(user, global []string, policy string, hash bool, warn, debug func(string)) (*hostKeys, error) {
	switch policy {
	case "":
		policy = PolicyStrict
	case PolicyStrict, PolicyAcceptNew, PolicyInsecure:
	default:
		return nil, fmt.Errorf("host key policy %q: want strict, accept-new or insecure", policy)
	}
	if len(user) == 0 {
		return nil, errors.New("no known_hosts file")
	}
	hk := &hostKeys{user: user, global: global, policy: policy, hash: hash, warn: warn, debug: debug}
	if policy == PolicyInsecure {
		return hk, nil
	}
	file := user[0]
	if _, err := os.Stat(file); os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, fmt.Errorf("create known_hosts directory: %w", err)
		}
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create known_hosts: %w", err)
		}
		f.Close()
	}
	return hk, nil
}

// khLine is one known_hosts entry.
type khLine struct {
	file     string
	line     int
	marker   string // "", "@cert-authority" or "@revoked"
	patterns []string
	key      ssh.PublicKey
}

func (l khLine) where() string { return fmt.Sprintf("%s:%d", l.file, l.line) }

// load reads every file; a missing file is empty, an unreadable one an
// error (a silently ignored known_hosts would turn strict into unknown).
func (hk *hostKeys) load() ([]khLine, error) {
	var all []khLine
	for _, f := range append(append([]string(nil), hk.user...), hk.global...) {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read known_hosts: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			text := bytes.TrimSpace(sc.Bytes())
			if len(text) == 0 || text[0] == '#' {
				continue
			}
			marker, hosts, key, _, _, err := ssh.ParseKnownHosts(text)
			if err != nil {
				if hk.debug != nil {
					hk.debug(fmt.Sprintf("%s:%d: skipped: %v", f, n, err))
				}
				continue
			}
			if marker != "" {
				marker = "@" + marker
			}
			all = append(all, khLine{file: f, line: n, marker: marker, patterns: hosts, key: key})
		}
	}
	return all, nil
}

// matches applies a hosts field to a normalized host ("h" or "[h]:port"):
// some pattern must match and no negated one may.
func (l khLine) matches(host string) bool {
	ok := false
	for _, p := range l.patterns {
		if strings.HasPrefix(p, "|1|") {
			if hashedMatch(p, host) {
				ok = true
			}
			continue
		}
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		m := sshPattern(strings.ToLower(p), strings.ToLower(host))
		if m && neg {
			return false
		}
		if m {
			ok = true
		}
	}
	return ok
}

// hashedMatch checks "|1|base64(salt)|base64(hmac-sha1(salt, host))".
func hashedMatch(p, host string) bool {
	parts := strings.Split(p, "|")
	if len(parts) != 4 {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(parts[2])
	want, err2 := base64.StdEncoding.DecodeString(parts[3])
	if err1 != nil || err2 != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return hmac.Equal(mac.Sum(nil), want)
}

// forHost is what the files say about addr ("host:port").
type forHost struct {
	host, port string
	norm       string   // "host" or "[host]:port"
	keys       []khLine // plain keys for norm
	noPort     bool     // keys are the host's port-22 entries (no [host]:port entry)
	cas        []khLine // @cert-authority lines for norm (or, like keys, port 22)
	revoked    []khLine // @revoked lines for norm
}

func (hk *hostKeys) lookup(addr string) (forHost, error) {
	lines, err := hk.load()
	if err != nil {
		return forHost{}, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "22"
	}
	fh := forHost{host: host, port: port, norm: knownhosts.Normalize(addr)}
	pick := func(name string) (keys, cas []khLine) {
		for _, l := range lines {
			if !l.matches(name) {
				continue
			}
			switch l.marker {
			case "":
				keys = append(keys, l)
			case "@cert-authority":
				cas = append(cas, l)
			}
		}
		return keys, cas
	}
	fh.keys, fh.cas = pick(fh.norm)
	if port != "22" && len(fh.keys) == 0 && len(fh.cas) == 0 {
		fh.keys, fh.cas = pick(host)
		fh.noPort = len(fh.keys) > 0 || len(fh.cas) > 0
	}
	for _, l := range lines {
		// As for ssh, a @revoked line applies to the hosts it names ("*"
		// is usual), with or without the port.
		if l.marker == "@revoked" && (l.matches(fh.norm) || l.matches(host)) {
			fh.revoked = append(fh.revoked, l)
		}
	}
	return fh, nil
}

// certHostKeyAlgos are offered first when a @cert-authority line matches,
// so a host with a certificate presents it; then plain ones, so a host
// without one can still be checked (or added).
var (
	certHostKeyAlgos = []string{
		ssh.CertAlgoED25519v01, ssh.CertAlgoECDSA256v01, ssh.CertAlgoECDSA384v01, ssh.CertAlgoECDSA521v01,
		ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01,
	}
	plainHostKeyAlgos = []string{
		ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256,
	}
)

// algorithms returns the host key algorithms to offer for addr: the
// certificate ones when a CA is known for it, then the types known_hosts
// holds for it (its [host]:port entries, else its port-22 ones), ssh-rsa
// as rsa-sha2-* (OpenSSH 8.8 and later refuse SHA-1 signatures). A host
// known only by plain keys is offered only those types, so it shows one
// we can check; a host known by nothing gets every plain type, so
// accept-new sees a key it can record, never a certificate it cannot.
func (hk *hostKeys) algorithms(addr string) ([]string, error) {
	if hk.policy == PolicyInsecure {
		return nil, nil
	}
	hk.mu.Lock()
	fh, err := hk.lookup(addr)
	hk.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	if len(fh.cas) > 0 {
		add(certHostKeyAlgos...)
	}
	for _, k := range fh.keys {
		switch t := k.key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256)
		default:
			add(t)
		}
	}
	if len(fh.keys) == 0 {
		add(plainHostKeyAlgos...)
	}
	return algos, nil
}

// check is the ssh.HostKeyCallback. hostname is "host:port".
func (hk *hostKeys) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	if hk.policy == PolicyInsecure {
		return nil
	}
	hk.mu.Lock()
	defer hk.mu.Unlock()
	fh, err := hk.lookup(hostname)
	if err != nil {
		return err
	}
	fp := ssh.FingerprintSHA256(key)
	cert, isCert := key.(*ssh.Certificate)
	for _, r := range fh.revoked {
		switch {
		case keysEqual(r.key, key), isCert && keysEqual(r.key, cert.Key):
			return &RevokedHostKeyError{Host: fh.norm, KeyType: key.Type(), Fingerprint: fp, File: r.file, Line: r.line}
		case isCert && keysEqual(r.key, cert.SignatureKey):
			return &RevokedHostKeyError{Host: fh.norm, KeyType: cert.SignatureKey.Type(), Fingerprint: ssh.FingerprintSHA256(cert.SignatureKey),
				File: r.file, Line: r.line, CA: true}
		}
	}
	if isCert {
		return hk.checkCert(fh, cert)
	}
	var sameType *khLine
	for i, l := range fh.keys {
		if keysEqual(l.key, key) {
			if fh.noPort && hk.debug != nil {
				hk.debug(fmt.Sprintf("%s: found matching key w/out port at %s", fh.norm, l.where()))
			}
			return nil
		}
		if sameType == nil && l.key.Type() == key.Type() {
			sameType = &fh.keys[i]
		}
	}
	if len(fh.keys) > 0 && !fh.noPort {
		w := fh.keys[0]
		if sameType != nil {
			w = *sameType
		}
		return &HostKeyChangedError{Host: hostname, KeyType: key.Type(), Fingerprint: fp, File: w.file, Line: w.line}
	}
	// Unknown: no entry, or only port-22 ones that do not match (ssh
	// treats those as unknown too, not changed).
	if hk.policy == PolicyStrict {
		return &UnknownHostError{Host: fh.host, Port: fh.port, KeyType: key.Type(), Fingerprint: fp, File: hk.user[0],
			Source: hk.source, SSHConfigValue: hk.sshConfigValue}
	}
	name := fh.norm
	if hk.hash {
		name = knownhosts.HashHostname(fh.norm)
	}
	line := name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	f, err := os.OpenFile(hk.user[0], os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("add host key to known_hosts: %w", err)
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("add host key to known_hosts: %w", err)
	}
	if hk.warn != nil {
		hk.warn(fmt.Sprintf("added host key for %s (%s %s) to %s", fh.norm, key.Type(), fp, hk.user[0]))
	}
	return nil
}

// checkCert checks a host certificate against the @cert-authority lines
// for the host, as ssh does: the CA must be listed for this host, the
// host name must be one of its principals, and now must lie in its
// validity window. Each failure is its own HostCertError.
func (hk *hostKeys) checkCert(fh forHost, cert *ssh.Certificate) error {
	e := &HostCertError{Host: fh.norm, CAType: cert.SignatureKey.Type(), CAFingerprint: ssh.FingerprintSHA256(cert.SignatureKey),
		KeyID: cert.KeyId, Principals: cert.ValidPrincipals, ValidAfter: cert.ValidAfter, ValidBefore: cert.ValidBefore}
	if cert.CertType != ssh.HostCert {
		e.Problem = CertNotHost
		return e
	}
	var ca *khLine
	for i, l := range fh.cas {
		if keysEqual(l.key, cert.SignatureKey) {
			ca = &fh.cas[i]
			break
		}
	}
	if ca == nil {
		e.Problem = CertUnknownCA
		for _, l := range fh.cas {
			e.KnownCAs = append(e.KnownCAs, l.where())
		}
		return e
	}
	e.File, e.Line = ca.file, ca.line
	if !contains(cert.ValidPrincipals, fh.host) {
		e.Problem = CertWrongPrincipal
		return e
	}
	now := uint64(time.Now().Unix())
	switch {
	case now < cert.ValidAfter:
		e.Problem = CertNotYetValid
		return e
	case cert.ValidBefore != ssh.CertTimeInfinity && now >= cert.ValidBefore:
		e.Problem = CertExpired
		return e
	}
	// Principal and window are checked above; what CheckCert adds is the
	// CA's signature (and critical options, which host certs lack).
	cc := &ssh.CertChecker{}
	if err := cc.CheckCert(fh.host, cert); err != nil {
		e.Problem = CertBadSignature
		return e
	}
	return nil
}

func keysEqual(a, b ssh.PublicKey) bool {
	return a != nil && b != nil && bytes.Equal(a.Marshal(), b.Marshal())
}

// ErrHostKey is wrapped by every host key refusal.
var ErrHostKey = errors.New("host key refused")

// UnknownHostError is a host not in known_hosts under the strict policy.
// Its message names the host, its key's fingerprint (SHA256:…, as
// ssh-keygen -l prints it), what made the policy strict, the line that
// adds the key once its fingerprint is checked, and what accepts new keys.
type UnknownHostError struct {
	Host, Port           string
	KeyType, Fingerprint string
	File                 string // the known_hosts file accept-new would write
	// Source is what made the policy strict (SourcePlan, SourceSSHConfig
	// or SourceDefault; "" reads as SourceDefault), and SSHConfigValue
	// ssh_config's StrictHostKeyChecking.
	Source, SSHConfigValue string
}

func (e *UnknownHostError) Error() string {
	why := "neither the plan's ssh.host_key_policy nor ssh_config's StrictHostKeyChecking says to accept a new host (OpenSSH in batch mode refuses it too)"
	switch e.Source {
	case SourcePlan:
		why = "the plan's ssh.host_key_policy is strict"
	case SourceSSHConfig:
		why = "ssh_config says StrictHostKeyChecking " + e.SSHConfigValue
	}
	return fmt.Sprintf("unknown host %s (%s key %s): refused, since %s; after checking that fingerprint with the host's administrators, add it with:\n    ssh-keyscan -p %s %s >> %s",
		net.JoinHostPort(e.Host, e.Port), e.KeyType, e.Fingerprint, why, e.Port, e.Host, e.File)
}

// Hint names what accepts new hosts' keys: the runner's flag, or the
// plan's key when the plan's own strict is what refused.
func (e *UnknownHostError) Hint() string {
	if e.Source == SourcePlan {
		return "to trust hosts not yet known on first contact instead, set the plan's ssh.host_key_policy: accept-new (or --set ssh.host_key_policy=accept-new); the plan's strict wins over --accept-new-host-keys"
	}
	return "to trust hosts not yet known on first contact instead, adding their keys to " + e.File + ", run again with --accept-new-host-keys, or set the plan's ssh.host_key_policy: accept-new"
}

func (e *UnknownHostError) Unwrap() error { return ErrHostKey }

// HostKeyChangedError is a host whose key differs from known_hosts. It is
// refused under every checking policy: it is what an attack looks like.
type HostKeyChangedError struct {
	Host                 string // "host:port"
	KeyType, Fingerprint string
	File                 string
	Line                 int
}

func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("host key for %s has CHANGED (now %s %s), known_hosts %s:%d has another; if the host was reinstalled, remove that line (ssh-keygen -R %s -f %s)",
		knownhosts.Normalize(e.Host), e.KeyType, e.Fingerprint, e.File, e.Line, knownhosts.Normalize(e.Host), e.File)
}

func (e *HostKeyChangedError) Unwrap() error { return ErrHostKey }

// RevokedHostKeyError is a host key, or the CA that signed its
// certificate, listed as @revoked. Nothing about it is to be "fixed" by
// editing known_hosts.
type RevokedHostKeyError struct {
	Host                 string // normalized: "host" or "[host]:port"
	KeyType, Fingerprint string // the revoked key
	CA                   bool   // the revoked key is the certificate's CA
	File                 string
	Line                 int
}

func (e *RevokedHostKeyError) Error() string {
	what := "its host key " + e.KeyType + " " + e.Fingerprint
	if e.CA {
		what = "the certificate authority that signed its host certificate (" + e.KeyType + " " + e.Fingerprint + ")"
	}
	return fmt.Sprintf("host key for %s is REVOKED: %s is marked @revoked at %s:%d; do not connect, and tell the host's administrators",
		e.Host, what, e.File, e.Line)
}

func (e *RevokedHostKeyError) Unwrap() error { return ErrHostKey }

// CertProblem is why a host certificate was refused.
type CertProblem int

const (
	CertUnknownCA      CertProblem = iota + 1 // signed by no CA listed for the host
	CertWrongPrincipal                        // the host name is not among its principals
	CertExpired
	CertNotYetValid
	CertBadSignature // the CA's signature does not verify
	CertNotHost      // a user certificate presented as a host key
)

// HostCertError is a host certificate refused for Problem.
type HostCertError struct {
	Host                  string // normalized: "host" or "[host]:port"
	Problem               CertProblem
	CAType, CAFingerprint string   // who signed it
	KeyID                 string   // the certificate's key ID
	Principals            []string // the names it is valid for
	ValidAfter            uint64
	ValidBefore           uint64
	File                  string   // the @cert-authority line that matched, if any
	Line                  int      //
	KnownCAs              []string // for CertUnknownCA: the CA lines that match the host
}

func (e *HostCertError) Error() string {
	cert := fmt.Sprintf("host certificate %q of %s", e.KeyID, e.Host)
	switch e.Problem {
	case CertUnknownCA:
		known := "no @cert-authority line in known_hosts matches " + e.Host
		if len(e.KnownCAs) > 0 {
			known = "the @cert-authority lines for " + e.Host + " (" + strings.Join(e.KnownCAs, ", ") + ") name other CAs"
		}
		return fmt.Sprintf("%s is signed by an unknown CA (%s %s): %s; if that CA is your site's, add it as a @cert-authority line", cert, e.CAType, e.CAFingerprint, known)
	case CertWrongPrincipal:
		return fmt.Sprintf("%s is not valid for the name %s (its principals: %s); connect by one of those names, or have the host's certificate re-signed with this one",
			cert, hostOnly(e.Host), strings.Join(e.Principals, ", "))
	case CertExpired:
		return fmt.Sprintf("%s EXPIRED at %s; the host's administrators must renew it (CA at %s:%d)", cert, certTime(e.ValidBefore), e.File, e.Line)
	case CertNotYetValid:
		return fmt.Sprintf("%s is not valid before %s; is this machine's clock right?", cert, certTime(e.ValidAfter))
	case CertBadSignature:
		return fmt.Sprintf("%s has a signature that does not verify with its CA %s %s (%s:%d): refused", cert, e.CAType, e.CAFingerprint, e.File, e.Line)
	case CertNotHost:
		return fmt.Sprintf("%s is a user certificate, not a host certificate: refused", cert)
	}
	return cert + " refused"
}

func (e *HostCertError) Unwrap() error { return ErrHostKey }

func certTime(t uint64) string {
	if t > 1<<62 {
		return "forever"
	}
	return time.Unix(int64(t), 0).UTC().Format(time.RFC3339)
}

// hostOnly strips "[...]:port" from a normalized host.
func hostOnly(norm string) string {
	if h, _, err := net.SplitHostPort(norm); err == nil {
		return h
	}
	return norm
}
