package transport

// The per-run challenge both wire formats use to admit only the runner's
// client: results/challenge.go, which node attach's handshake shares, has
// its rules. tcp's hello/auth and rdma's challenge/hello frames both keep
// them; the record a client's MAC covers is tcp's request record, rdma's
// endpoint. The server tells the client nothing about the region before
// the MAC has checked out.

import "rdmasweep/results"

// NonceSize is the length of a challenge's nonce; MACSize of the answer.
const (
	NonceSize = results.NonceSize
	MACSize   = results.MACSize
)

// NewNonce fills nonce (NonceSize bytes) from the system's CSPRNG.
func NewNonce(nonce []byte) error { return results.NewNonce(nonce) }

// Answer is the client's proof that it holds secret: the MAC of nonce and
// the record it sends with it.
func Answer(secret, nonce, record []byte) []byte { return results.Answer(secret, nonce, record) }

// Admit reports whether mac proves secret for nonce and record, in
// constant time.
func Admit(secret, nonce, record, mac []byte) bool {
	return results.Admit(secret, nonce, record, mac)
}
