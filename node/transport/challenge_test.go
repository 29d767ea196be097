package transport

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// TestAnswerIsTheWireMAC pins the MAC both wire formats carry to a value
// computed outside Go (Python's hmac module), so nodes built before and
// after any change to this file still admit each other.
func TestAnswerIsTheWireMAC(t *testing.T) {
	secret := []byte("run-secret")
	nonce := make([]byte, NonceSize)
	for i := range nonce {
		nonce[i] = byte(i)
	}
	// A tcp request record: block_size 1 MiB, queue_depth 8, qps 1.
	record := []byte{0, 0, 16, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	const want = "feadae72654f314afeb59dff55c7a8880b37cb97da402a954d5293148013a57b"
	got := Answer(secret, nonce, record)
	if hex.EncodeToString(got) != want || len(got) != MACSize {
		t.Fatalf("Answer = %x, want %s", got, want)
	}
	if !Admit(secret, nonce, record, got) {
		t.Fatal("Admit refuses the right answer")
	}
	for name, bad := range map[string][]byte{
		"other secret": Answer([]byte("guess"), nonce, record),
		"other record": Answer(secret, nonce, append(bytes.Clone(record[:15]), 1)),
		"zero":         make([]byte, MACSize),
		"short":        got[:MACSize-1],
		"none":         nil,
	} {
		if Admit(secret, nonce, record, bad) {
			t.Errorf("Admit takes %s", name)
		}
	}
}

func TestNewNonceIsFreshAndSized(t *testing.T) {
	a, b := make([]byte, NonceSize), make([]byte, NonceSize)
	if err := NewNonce(a); err != nil {
		t.Fatal(err)
	}
	if err := NewNonce(b); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) || bytes.Equal(a, make([]byte, NonceSize)) {
		t.Fatalf("nonces %x and %x", a, b)
	}
	if err := NewNonce(make([]byte, 16)); err == nil {
		t.Fatal("NewNonce filled a 16-byte nonce")
	}
}
