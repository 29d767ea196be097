package nvmeof

// What a point's secret gives both sides, so that nothing but the secret
// crosses from the runner to node (on node's control line, never argv):
//
//   - Names: the subsystem's NQN and the one host NQN it admits, new for
//     each point. They are names, not credentials: configfs and sysfs show
//     them to every local user.
//   - HostID: the host's UUID for the point, which the initiator sends
//     beside its NQN (kernels since 6.x refuse a host NQN new to a host
//     ID they already know, and the default ID is the machine's own).
//   - Key: the host's DH-HMAC-CHAP secret (nvmet's dhchap_key, the
//     initiator's dhchap_secret=), in the DHHC-1 form the kernel takes,
//     which is the credential where the kernel has in-band authentication.
//   - DoneRecord: what the client's MAC covers when it says it is done.
//
// Each is an HMAC-SHA256 of the secret under a label of its own, so
// knowing one (the NQNs are public) tells nothing of another.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
)

// derive is HMAC-SHA256(secret, label).
func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Names are the subsystem's and the host's NQN for a point's secret.
func Names(secret []byte) (nqn, hostNQN string) {
	tag := hex.EncodeToString(derive(secret, "rdmasweep nvmeof nqn")[:8])
	return "nqn.2014-08.org.rdmasweep:nvmeof-" + tag, "nqn.2014-08.org.rdmasweep:host-" + tag
}

// HostID is the host's UUID (hostid=) for a point's secret, a version 4
// UUID in its usual form.
func HostID(secret []byte) string {
	u := derive(secret, "rdmasweep nvmeof hostid")[:16]
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Key is the host's DH-HMAC-CHAP secret for a point's secret:
// "DHHC-1:00:" and the base64 of a 32-byte key followed by its CRC-32
// (little-endian), then ":", as nvme gen-dhchap-key writes one. 00 says
// the key is used as it is (no transformation); the hash of the exchange
// is nvmet's default, SHA-256.
func Key(secret []byte) string {
	k := derive(secret, "rdmasweep nvmeof dhchap")
	b := binary.LittleEndian.AppendUint32(append([]byte{}, k...), crc32.ChecksumIEEE(k))
	return fmt.Sprintf("DHHC-1:00:%s:", base64.StdEncoding.EncodeToString(b))
}

// DoneRecord is the record the client's answer to node nvmet's challenge
// covers (results.Answer): it says the client is done, and nothing else.
var DoneRecord = []byte("rdmasweep nvmeof done")
