//go:build linux

package rdmanl

// Netlink messages as the kernel's RDMA netlink (NETLINK_RDMA) speaks
// them: a header, then attributes (no family header), in host byte order.
// Only what UverbsDriverID needs; kept free of sockets so it can be
// tested on any host.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

const (
	nlHeaderLen = 16 // struct nlmsghdr
	nlAttrLen   = 4  // struct nlattr
	nlAttrType  = 0x3fff
)

func nlAlign(n int) int { return (n + 3) &^ 3 }

// nlRequest is a request of type typ with flags (NLM_F_REQUEST added)
// and the attributes attrs, already encoded.
func nlRequest(typ, flags uint16, seq uint32, attrs []byte) []byte {
	b := make([]byte, nlHeaderLen, nlHeaderLen+len(attrs))
	binary.NativeEndian.PutUint32(b[0:], uint32(nlHeaderLen+len(attrs)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags|syscall.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return append(b, attrs...)
}

// nlAppendAttr appends attribute typ holding v, padded.
func nlAppendAttr(b []byte, typ uint16, v []byte) []byte {
	var h [nlAttrLen]byte
	binary.NativeEndian.PutUint16(h[0:], uint16(nlAttrLen+len(v)))
	binary.NativeEndian.PutUint16(h[2:], typ)
	b = append(append(b, h[:]...), v...)
	return append(b, make([]byte, nlAlign(len(v))-len(v))...)
}

// nlU32 encodes v as a u32 attribute's payload.
func nlU32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// nlAttrs is one message's attributes by type (the nested and
// byte-order flags masked off); a repeated type keeps the last.
func nlAttrs(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for len(b) >= nlAttrLen {
		n := int(binary.NativeEndian.Uint16(b[0:]))
		if n < nlAttrLen || n > len(b) {
			return nil, fmt.Errorf("netlink attribute of length %d in %d bytes", n, len(b))
		}
		out[binary.NativeEndian.Uint16(b[2:])&nlAttrType] = b[nlAttrLen:n]
		b = b[min(nlAlign(n), len(b)):]
	}
	return out, nil
}

// nlString is a string attribute's value, up to its NUL.
func nlString(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// nlUint is an unsigned attribute's value, of 4 or 8 bytes (the kernel
// declares some u64 and sends u32).
func nlUint(v []byte) (uint64, bool) {
	switch len(v) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(v)), true
	case 8:
		return binary.NativeEndian.Uint64(v), true
	}
	return 0, false
}

// errNLDone ends a dump.
var errNLDone = errors.New("netlink: done")

// nlReplies parses what one read gave: each message's attributes go to
// fn. It returns errNLDone at NLMSG_DONE, or after a message that is not
// part of a dump; the errno of an NLMSG_ERROR; nil when more is to come.
func nlReplies(b []byte, seq uint32, fn func(map[uint16][]byte)) error {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return fmt.Errorf("parse a netlink reply: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Seq != seq {
			continue // an answer to someone else's request
		}
		switch m.Header.Type {
		case syscall.NLMSG_DONE:
			return errNLDone
		case syscall.NLMSG_ERROR:
			if len(m.Data) < 4 {
				return errors.New("netlink: short error message")
			}
			if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
				return syscall.Errno(-e)
			}
			return errNLDone // an acknowledgement
		}
		attrs, err := nlAttrs(m.Data)
		if err != nil {
			return err
		}
		fn(attrs)
		if m.Header.Flags&syscall.NLM_F_MULTI == 0 {
			return errNLDone
		}
	}
	return nil
}
