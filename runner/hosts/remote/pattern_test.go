package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestSSHPattern(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"[127.0.0.1]:2222", "[127.0.0.1]:2222", true},
		{"[127.0.0.1]:2222", "1:2222", false}, // not a character class
		{"[127.0.0.1]:*", "[127.0.0.1]:40123", true},
		{"*.cluster.example", "n1.cluster.example", true},
		{"*.cluster.example", "cluster.example", false},
		{"n?", "n1", true},
		{"n?", "n12", false},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"", "", true},
		{"", "a", false},
	} {
		if got := sshPattern(c.pattern, c.s); got != c.want {
			t.Errorf("sshPattern(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// TestKnownHostsOtherPort is what the soft-RoCE guest's runner tests
// caught: a host on another port is written "[host]:port" in known_hosts,
// and that line must be found for it (and not for port 22).
func TestKnownHostsOtherPort(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	key := signer.PublicKey()
	file := filepath.Join(t.TempDir(), "known_hosts")
	line := "[127.0.0.1]:38509 " + string(ssh.MarshalAuthorizedKey(key))
	if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	hk, err := newHostKeys([]string{file}, nil, PolicyStrict, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 38509}
	if err := hk.check("127.0.0.1:38509", addr, key); err != nil {
		t.Errorf("the host's own [host]:port line: %v", err)
	}
	if err := hk.check("127.0.0.1:22", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, key); err == nil {
		t.Error("a [host]:38509 line accepted the host on port 22")
	}
}
