//go:build linux

package rdmanl

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"
)

// nlReply is a message the kernel could send: header, then attrs.
func nlReply(typ, flags uint16, seq uint32, attrs []byte) []byte {
	b := nlRequest(typ, 0, seq, attrs)
	binary.NativeEndian.PutUint16(b[6:], flags)
	return b
}

func TestNLAttrsRoundTrip(t *testing.T) {
	attrs := nlAppendAttr(nil, 1, nlU32(7))
	attrs = nlAppendAttr(attrs, 2, []byte("rxe0\x00")) // 5 bytes: padded to 8
	attrs = nlAppendAttr(attrs, 0x8000|3, binary.NativeEndian.AppendUint64(nil, 1<<40))
	req := nlRequest(0x1401, syscall.NLM_F_DUMP, 9, attrs)
	if got := binary.NativeEndian.Uint32(req); int(got) != len(req) || len(req) != 16+8+12+12 {
		t.Fatalf("request length %d in its header, %d bytes", got, len(req))
	}
	if f := binary.NativeEndian.Uint16(req[6:]); f != syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP {
		t.Errorf("flags %#x", f)
	}
	a, err := nlAttrs(req[16:])
	if err != nil {
		t.Fatal(err)
	}
	idx, ok := nlUint(a[1])
	big, ok8 := nlUint(a[3])
	if !ok || idx != 7 || nlString(a[2]) != "rxe0" || !ok8 || big != 1<<40 {
		t.Errorf("attrs %v: index %d %v, name %q, u64 %d %v", a, idx, ok, nlString(a[2]), big, ok8)
	}
	if _, err := nlAttrs([]byte{200, 0, 1, 0, 0, 0, 0, 0}); err == nil {
		t.Error("an attribute longer than its message parsed")
	}
	if _, ok := nlUint([]byte{1, 2}); ok {
		t.Error("a 2-byte value read as a number")
	}
}

func TestNLReplies(t *testing.T) {
	var names []string
	collect := func(a map[uint16][]byte) { names = append(names, nlString(a[2])) }
	dump := append(nlReply(0x1401, syscall.NLM_F_MULTI, 5, nlAppendAttr(nil, 2, []byte("rxe0\x00"))),
		nlReply(0x1401, syscall.NLM_F_MULTI, 4, nlAppendAttr(nil, 2, []byte("other\x00")))...) // not ours
	if err := nlReplies(dump, 5, collect); err != nil {
		t.Fatalf("a dump's first part: %v, want nil (more to come)", err)
	}
	done := append(nlReply(0x1401, syscall.NLM_F_MULTI, 5, nlAppendAttr(nil, 2, []byte("siw0\x00"))), nlReply(syscall.NLMSG_DONE, syscall.NLM_F_MULTI, 5, make([]byte, 4))...)
	if err := nlReplies(done, 5, collect); !errors.Is(err, errNLDone) {
		t.Fatalf("a dump's last part: %v, want done", err)
	}
	if len(names) != 2 || names[0] != "rxe0" || names[1] != "siw0" {
		t.Errorf("names %q, want rxe0 and siw0", names)
	}
	if err := nlReplies(nlReply(0x1412, 0, 6, nil), 6, collect); !errors.Is(err, errNLDone) {
		t.Errorf("a single reply: %v, want done", err)
	}
	errno := -int32(syscall.EOPNOTSUPP)
	e := binary.NativeEndian.AppendUint32(nil, uint32(errno))
	if err := nlReplies(nlReply(syscall.NLMSG_ERROR, 0, 7, append(e, make([]byte, 16)...)), 7, collect); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("an error reply: %v, want EOPNOTSUPP", err)
	}
}
