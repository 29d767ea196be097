package transport

// The per-run challenge both wire formats use to admit only the runner's
// client. The rules, which tcp's hello/auth and rdma's challenge/hello
// frames both keep:
//
//   - The server sends a fresh random nonce of NonceSize bytes on every
//     connection, so an answer seen once is worth nothing on the next.
//   - The client answers MAC = HMAC-SHA256(secret, nonce || record), where
//     record is the bytes it sends with the answer (tcp: its request
//     record, rdma: its endpoint). Those cannot be changed in flight
//     without the secret, and the secret itself never crosses the wire.
//   - The server compares in constant time, and tells the client nothing
//     about the region before the MAC has checked out.

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

// Answer is the client's proof that it holds secret: the MAC of nonce and
// the record it sends with it.
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
