package results

// The challenge node and runner share wherever one side must prove it
// holds a secret the other gave it: the data path's per-run secret
// (node/transport: tcp's hello/auth, rdma's challenge/hello) and node
// attach's token (attach.go). The rules:
//
//   - The side that checks sends a fresh random nonce of NonceSize bytes
//     on every connection, so an answer seen once is worth nothing on the
//     next.
//   - The other answers MAC = HMAC-SHA256(secret, nonce || record), where
//     record is the bytes it sends with the answer (tcp: its request
//     record, rdma: its endpoint, attach: the command line). Those cannot
//     be changed in flight without the secret, and the secret itself
//     never crosses the wire.
//   - The checking side compares in constant time (Admit), and acts on
//     nothing the other sent before the MAC has checked out.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// NonceSize is the length of a challenge's nonce; MACSize of the answer.
const (
	NonceSize = 32
	MACSize   = sha256.Size
)

// NewNonce fills nonce (NonceSize bytes) from the system's CSPRNG.
func NewNonce(nonce []byte) error {
	if len(nonce) != NonceSize {
		return fmt.Errorf("nonce: %d bytes, want %d", len(nonce), NonceSize)
	}
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	return nil
}

// Answer is the proof that one holds secret: the MAC of nonce and the
// record sent with it.
func Answer(secret, nonce, record []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(nonce)
	m.Write(record)
	return m.Sum(nil)
}

// Admit reports whether mac proves secret for nonce and record. It takes
// the same time whatever bytes of mac are wrong.
func Admit(secret, nonce, record, mac []byte) bool {
	return hmac.Equal(Answer(secret, nonce, record), mac)
}
