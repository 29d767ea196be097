package tcp

// Wire format, version 1. Every integer is little-endian; every message has
// a fixed size, so a reader never allocates by what the peer claims.
//
//	hello   server→client  40 B  magic u32 | version u16 | flags u16 (bit0: auth required) | nonce [32]
//	auth    client→server  56 B  magic u32 | version u16 | 0 u16 | record [16] | mac [32]
//	          record = block_size u32 | queue_depth u32 | qps u32 | 0 u32
//	          mac    = HMAC-SHA256(secret, nonce || record); zero when the client has no secret
//	welcome server→client  32 B  magic u32 | version u16 | status u16 | size u64 | seed u64 | flags u32 (bit0: patterned) | 0 u32
//	          size and seed are zero unless status is OK: nothing about the
//	          region is revealed before the client has proved the secret.
//	request client→server  24 B  magic u32 | version u16 | op u16 (1 = read) | tag u32 | length u32 | offset u64
//	reply   server→client  16 B  magic u32 | version u16 | status u16 | tag u32 | length u32
//	          followed by length bytes of the region when status is OK;
//	          length is 0 otherwise.
//
// Requests are answered strictly in order. A request with a bad magic or
// version loses the framing: the server replies with an error and closes the
// connection. Any other bad request gets an error reply and the connection
// goes on.

import (
	"encoding/binary"
	"fmt"
)

const (
	magic   uint32 = 0x50575352 // "RSWP" on the wire
	version uint16 = 1

	helloSize   = 40
	authSize    = 56
	welcomeSize = 32
	requestSize = 24
	replySize   = 16

	opRead uint16 = 1

	flagAuth      = 1
	flagPatterned = 1

	// MaxBlock is the largest read one request may ask for.
	MaxBlock = 256 << 20
)

// Status codes of welcome and reply messages.
const (
	statusOK uint16 = iota
	statusOutOfRange
	statusTooLarge
	statusBadMagic
	statusBadVersion
	statusBadOp
	statusAuth
)

func statusText(s uint16) string {
	switch s {
	case statusOK:
		return "ok"
	case statusOutOfRange:
		return "read outside the region"
	case statusTooLarge:
		return fmt.Sprintf("read larger than %d bytes", MaxBlock)
	case statusBadMagic:
		return "bad magic"
	case statusBadVersion:
		return "unsupported version"
	case statusBadOp:
		return "unknown operation"
	case statusAuth:
		return "authentication refused"
	}
	return fmt.Sprintf("status %d", s)
}

// request is one decoded read request.
type request struct {
	op     uint16
	tag    uint32
	length uint32
	offset uint64
}

func (r request) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], magic)
	le.PutUint16(b[4:], version)
	le.PutUint16(b[6:], r.op)
	le.PutUint32(b[8:], r.tag)
	le.PutUint32(b[12:], r.length)
	le.PutUint64(b[16:], r.offset)
}

// decodeRequest parses a request frame of requestSize bytes and checks it
// against a region of size bytes. A non-OK status says why it must not be
// served; fatal says the framing is lost and the connection must close.
func decodeRequest(b []byte, size int64) (r request, status uint16, fatal bool) {
	if len(b) < requestSize {
		return r, statusBadMagic, true
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != magic {
		return r, statusBadMagic, true
	}
	if le.Uint16(b[4:]) != version {
		return r, statusBadVersion, true
	}
	r = request{op: le.Uint16(b[6:]), tag: le.Uint32(b[8:]), length: le.Uint32(b[12:]), offset: le.Uint64(b[16:])}
	switch {
	case r.op != opRead:
		return r, statusBadOp, false
	case r.length > MaxBlock:
		return r, statusTooLarge, false
	// offset <= size first, so size-offset cannot wrap.
	case size < 0 || r.offset > uint64(size) || uint64(r.length) > uint64(size)-r.offset:
		return r, statusOutOfRange, false
	}
	return r, statusOK, false
}

func encodeReply(b []byte, status uint16, tag, length uint32) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], magic)
	le.PutUint16(b[4:], version)
	le.PutUint16(b[6:], status)
	le.PutUint32(b[8:], tag)
	le.PutUint32(b[12:], length)
}

func decodeReply(b []byte) (status uint16, tag, length uint32, err error) {
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != magic {
		return 0, 0, 0, fmt.Errorf("reply: bad magic %#x", le.Uint32(b[0:]))
	}
	if v := le.Uint16(b[4:]); v != version {
		return 0, 0, 0, fmt.Errorf("reply: version %d, want %d", v, version)
	}
	return le.Uint16(b[6:]), le.Uint32(b[8:]), le.Uint32(b[12:]), nil
}

// checkHeader validates the magic and version at the start of a handshake
// message.
func checkHeader(b []byte, what string) error {
	le := binary.LittleEndian
	if m := le.Uint32(b[0:]); m != magic {
		return fmt.Errorf("%s: bad magic %#x (not an rdmasweep tcp peer?)", what, m)
	}
	if v := le.Uint16(b[4:]); v != version {
		return fmt.Errorf("%s: version %d, want %d", what, v, version)
	}
	return nil
}

func putHeader(b []byte, word uint16) {
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint16(b[4:], version)
	binary.LittleEndian.PutUint16(b[6:], word)
}
