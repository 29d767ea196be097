package results

import (
	"strings"
	"testing"
)

// The runner's answer proves the key for one nonce and one argv: another
// argv (a man in the middle's), another nonce (a later connection's),
// another key (an impostor's) or the next key are all refused, and the
// hello names the key without holding it.
func TestAttachKey(t *testing.T) {
	k := AttachKey("t0ken")
	hello, nonce, err := NewAttachHello(k, 7)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := hello.HelloNonce(); err != nil || string(n) != string(nonce) || hello.ID != k.ID() || strings.Contains(hello.ID, "t0ken") {
		t.Fatalf("hello %+v: want the key's ID and the nonce (%v)", hello, err)
	}
	argv := []string{"read", "--server", "198.18.0.1:4000"}
	cmd := AttachCommand{Argv: argv, MAC: k.MAC(nonce, argv)}
	if !k.Admit(nonce, cmd) {
		t.Fatal("the runner's own answer is refused")
	}
	_, other, _ := NewAttachHello(k, 7)
	for name, c := range map[string]struct {
		key   AttachKey
		nonce []byte
		cmd   AttachCommand
	}{
		"swapped argv": {k, nonce, AttachCommand{Argv: []string{"serve", "--file", "/root/.ssh/id_ed25519"}, MAC: cmd.MAC}},
		"other nonce":  {k, other, cmd},
		"other key":    {AttachKey("guess"), nonce, cmd},
		"next key":     {k.Next(nonce), nonce, cmd},
		"no MAC":       {k, nonce, AttachCommand{Argv: argv}},
	} {
		if c.key.Admit(c.nonce, c.cmd) {
			t.Errorf("%s: admitted", name)
		}
	}
	if k.Next(nonce).ID() == k.ID() || k.Next(nonce).ID() == k.Next(other).ID() {
		t.Error("the next key's ID is the same as this one's, or the same whatever the nonce")
	}
}
