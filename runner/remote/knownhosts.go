package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Host key policies, as written in a plan's ssh.host_key_policy.
const (
	PolicyStrict    = "strict"     // refuse unknown hosts
	PolicyAcceptNew = "accept-new" // add unknown hosts (the default)
	PolicyInsecure  = "insecure"   // check nothing
)

// hostKeys checks host keys against one known_hosts file under a policy.
// A changed key is refused under every policy but insecure.
type hostKeys struct {
	file   string
	policy string
	warn   func(string)

	mu sync.Mutex // serialises reading and appending the file
}

func newHostKeys(file, policy string, warn func(string)) (*hostKeys, error) {
	switch policy {
	case "":
		policy = PolicyAcceptNew
	case PolicyStrict, PolicyAcceptNew, PolicyInsecure:
	default:
		return nil, fmt.Errorf("host key policy %q: want strict, accept-new or insecure", policy)
	}
	hk := &hostKeys{file: file, policy: policy, warn: warn}
	if policy == PolicyInsecure {
		return hk, nil
	}
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

// algorithms returns the host key algorithms to offer for addr
// ("host:port"), from the key types known_hosts holds for it, so the
// server presents a key we can check. ssh-rsa is offered as rsa-sha2-*,
// since OpenSSH 8.8 and later refuse SHA-1 signatures. nil (the library's
// defaults) when nothing is known.
func (hk *hostKeys) algorithms(addr string) ([]string, error) {
	if hk.policy == PolicyInsecure {
		return nil, nil
	}
	cb, err := hk.callback()
	if err != nil {
		return nil, err
	}
	// Checking a key no host has makes knownhosts list every key it
	// knows for addr.
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	probe, _ := ssh.NewPublicKey(pub)
	var ke *knownhosts.KeyError
	if err := cb(addr, fakeAddr(addr), probe); !errors.As(err, &ke) {
		return nil, nil
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
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256)
		default:
			add(t)
		}
	}
	return algos, nil
}

// fakeAddr gives knownhosts a remote address equal to the host name when
// it is an IP, so the lookup only considers addr.
func fakeAddr(addr string) net.Addr {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &net.TCPAddr{}
	}
	p, _ := strconv.Atoi(port)
	return &net.TCPAddr{IP: net.ParseIP(host), Port: p}
}

func (hk *hostKeys) callback() (ssh.HostKeyCallback, error) {
	cb, err := knownhosts.New(hk.file)
	if err != nil {
		return nil, fmt.Errorf("read known_hosts: %w", err)
	}
	return cb, nil
}

// check is the ssh.HostKeyCallback.
func (hk *hostKeys) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	if hk.policy == PolicyInsecure {
		return nil
	}
	hk.mu.Lock()
	defer hk.mu.Unlock()
	cb, err := hk.callback()
	if err != nil {
		return err
	}
	err = cb(hostname, remote, key)
	var ke *knownhosts.KeyError
	if err == nil || !errors.As(err, &ke) {
		return err
	}
	fp := ssh.FingerprintSHA256(key)
	if len(ke.Want) > 0 {
		w := ke.Want[0]
		return &HostKeyChangedError{Host: hostname, KeyType: key.Type(), Fingerprint: fp, File: w.Filename, Line: w.Line}
	}
	host, port, _ := net.SplitHostPort(hostname)
	if hk.policy == PolicyStrict {
		return &UnknownHostError{Host: host, Port: port, KeyType: key.Type(), Fingerprint: fp, File: hk.file}
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)
	f, err := os.OpenFile(hk.file, os.O_APPEND|os.O_WRONLY, 0o600)
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
		hk.warn(fmt.Sprintf("added host key for %s (%s %s) to %s", knownhosts.Normalize(hostname), key.Type(), fp, hk.file))
	}
	return nil
}

// ErrHostKey is wrapped by every host key refusal.
var ErrHostKey = errors.New("host key refused")

// UnknownHostError is a host not in known_hosts under the strict policy.
type UnknownHostError struct {
	Host, Port           string
	KeyType, Fingerprint string
	File                 string
}

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("unknown host %s (%s key %s) and host_key_policy is strict; after checking the fingerprint, add it with:\n    ssh-keyscan -p %s %s >> %s",
		net.JoinHostPort(e.Host, e.Port), e.KeyType, e.Fingerprint, e.Port, e.Host, e.File)
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
