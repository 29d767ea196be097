package remote

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// ErrAuth is wrapped when the host accepted none of our keys.
var ErrAuth = errors.New("authentication failed")

// keyring is the keys to offer, in order, and what was tried, for messages.
type keyring struct {
	signers []ssh.Signer
	tried   []string // "FILE" or "ssh-agent (N keys)"
	agent   net.Conn // closed after the handshake
}

func (k *keyring) close() {
	if k.agent != nil {
		k.agent.Close()
		k.agent = nil
	}
}

// loadKeys gathers keys in the order OpenSSH users expect: the plan's
// identity files (or ssh_config's), then ssh-agent, then the default
// ~/.ssh/id_ed25519, id_ecdsa, id_rsa. A passphrase-protected key is
// skipped when an agent is running (it may hold it); with no agent it is
// an error saying to load it there, since the runner never prompts.
func loadKeys(identityFiles []string) (*keyring, error) {
	k := &keyring{}
	var agentSigners []ssh.Signer
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			s, err := agent.NewClient(c).Signers()
			if err == nil && len(s) > 0 {
				k.agent = c
				agentSigners = s
			} else {
				c.Close()
			}
		}
	}
	haveAgent := k.agent != nil
	var protected []string
	addFile := func(path string, explicit bool) error {
		b, err := os.ReadFile(path)
		if err != nil {
			if explicit {
				return fmt.Errorf("read identity file: %w", err)
			}
			return nil
		}
		s, err := ssh.ParsePrivateKey(b)
		var pe *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pe):
			if explicit && !haveAgent {
				return fmt.Errorf("identity file %s is protected by a passphrase and no ssh-agent is running (SSH_AUTH_SOCK): start one and load the key with `ssh-add %s`", path, path)
			}
			protected = append(protected, path)
			return nil
		case err != nil:
			if explicit {
				return fmt.Errorf("parse identity file %s: %w", path, err)
			}
			return nil
		}
		k.signers = append(k.signers, s)
		k.tried = append(k.tried, path)
		return nil
	}
	for _, f := range identityFiles {
		if err := addFile(f, true); err != nil {
			k.close()
			return nil, err
		}
	}
	if haveAgent {
		k.signers = append(k.signers, agentSigners...)
		k.tried = append(k.tried, fmt.Sprintf("ssh-agent (%d keys)", len(agentSigners)))
	}
	if home, err := os.UserHomeDir(); err == nil {
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			p := filepath.Join(home, ".ssh", name)
			if contains(identityFiles, p) {
				continue
			}
			addFile(p, false)
		}
	}
	if len(k.signers) == 0 {
		k.close()
		if len(protected) > 0 {
			return nil, fmt.Errorf("no usable key: %s protected by a passphrase and no ssh-agent is running: load it with `ssh-add %s`", strings.Join(protected, ", "), protected[0])
		}
		return nil, fmt.Errorf("no key to log in with: set identity_file in the plan, run ssh-agent, or create ~/.ssh/id_ed25519")
	}
	return k, nil
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
