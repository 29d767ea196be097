package rdma

// The out-of-band exchange: how a client and a server trade what they need to
// connect their queue pairs, over the TCP connection the client opened.
//
// Every message is a frame:
//
//	magic "RDSW" | version u8 | kind u8 | body length u32 | body
//
// all integers big-endian. A reader refuses a wrong magic, another version,
// an unexpected kind, and a body longer than maxBody or of a length the kind
// does not allow, before it looks at the body. The conversation is:
//
//	S→C challenge    auth u8 | nonce [32]
//	C→S hello        endpoint | mac [32]         (connect tcp)
//	 or hello-cm     n u16 | mac [32]            (connect cm)
//	S→C welcome      endpoint | region           (only if the mac checked out)
//	 or welcome-cm   cm | region                 (the same, for hello-cm)
//	 or refusal      utf-8 message
//	S→C ready-region index u16 | rkey u32 | addr u64 (pipelined: one per region)
//	 or abort        utf-8 message               (its preparation failed)
//	C→S release      index u16                   (windowed: one per region, once read)
//	C→S bye          bytes u64 | reads u64       (when the client closes)
//	 or abort        utf-8 message               (when it gave up after welcome)
//
//	endpoint = lid u16 | gid [16] | active mtu u8 (enum ibv_mtu) |
//	           max_dest_rd_atomic u8 | n u16 | n × (qpn u32 | psn u32)
//	cm       = port u16 | max_dest_rd_atomic u8 | token [16]
//	region   = addr u64 | length u64 | seed u64 | flags u8 |
//	           mr_size u64 | n u16 | n × rkey u32
//	flags    = bit 0: the file holds the pattern (verifiable);
//	           bit 1: the region is registered with on-demand paging;
//	           bit 2: pipelined: the rkeys are 0 until each memory
//	           region's ready-region message brings its own, and the
//	           region's byte off is at that message's addr + off (the
//	           mapping's address, which registering the first may move;
//	           io direct: where the region's ring buffer places it);
//	           bit 3: windowed: the client sends a release for each
//	           memory region, in order, once its READs of it have all
//	           completed, and reads the file once from its start; the
//	           server deregisters the region then, and registers the
//	           next beyond its window
//
// The region is registered as n memory regions over one mapping: region i
// covers bytes [i × mr_size, min((i+1) × mr_size, length)) and is read with
// rkey i. n is ceil(length / mr_size), and 1 with mr_size = length when the
// whole file is one memory region. A pipelined server registers them in
// order after the welcome, and sends each one's ready-region as soon as it
// is registered; the client reads a byte only once its memory region has
// been announced.
//
// mac is HMAC-SHA256(secret, nonce || the hello's bytes before it) when the
// challenge asks for auth, zero otherwise. The secret itself never crosses
// the network, and the region (address, rkey, seed) is sent only to a client
// that proved it holds it.
//
// With connect cm the QPs are connected by rdma_cm after the welcome: the
// client sends n connect requests to the server's rdma_cm port, each with
// private data token [16] | index u16, and the server accepts only those
// carrying this session's token, each index once. The token is random per
// session and sent only in the welcome, so a peer that did not pass the
// challenge gets no QP. (docs/security.md says why the challenge stays on
// TCP.) The client's counts in bye are the server's only account of what
// was read, since RDMA READs complete without the server's CPU; so a client
// that ends after welcome without a bye (an abort, or a bare disconnect) is
// an error on the server, not a run of zero bytes.
//
// A server answers a malformed hello with a refusal naming the problem, then
// drops the connection; it never sends its region to a client that did not
// send a well-formed, authenticated hello.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"time"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

const (
	wireMagic = "RDSW"
	// wireVersion 2: hello-cm and welcome-cm, and the region's flags byte;
	// 3: the region as several memory regions, one rkey each; 4: the
	// pipelined region and ready-region; 5: the window and release.
	wireVersion = 5
	headerLen   = 4 + 1 + 1 + 4
	maxBody     = 64 << 10
	// maxQPs bounds the QP list a peer may send; it also bounds client.qps.
	maxQPs = 1024
	// maxBlock is the largest RDMA READ the client issues.
	maxBlock = 1 << 30
	// handshakeTimeout bounds one handshake, so a client that connects and
	// stalls cannot hold a server past it.
	handshakeTimeout = 15 * time.Second
)

// Message kinds.
const (
	kindChallenge = 1
	kindHello     = 2
	kindWelcome   = 3
	kindRefusal   = 4
	kindBye       = 5
	kindAbort     = 6
	kindHelloCM   = 7
	kindWelcomeCM = 8
	kindRegion    = 9
	kindRelease   = 10
)

func kindName(k byte) string {
	switch k {
	case kindChallenge:
		return "challenge"
	case kindHello:
		return "hello"
	case kindWelcome:
		return "welcome"
	case kindRefusal:
		return "refusal"
	case kindBye:
		return "bye"
	case kindAbort:
		return "abort"
	case kindHelloCM:
		return "hello-cm"
	case kindWelcomeCM:
		return "welcome-cm"
	case kindRegion:
		return "ready-region"
	case kindRelease:
		return "release"
	}
	return fmt.Sprintf("kind %d", k)
}

// errProtocol is wrapped by every malformed-message error.
var errProtocol = errors.New("rdma exchange protocol error")

// errClientFailed is wrapped by the server's error when its client ended
// after the handshake without a bye.
var errClientFailed = errors.New("failed after the handshake")

// maxAbortLen bounds the reason a client sends in an abort, so it stays a
// line of the server's error.
const maxAbortLen = 1024

// qpAddr is one queue pair's address on its side.
type qpAddr struct {
	QPN uint32
	PSN uint32
}

// endpoint is one side's connection parameters.
type endpoint struct {
	LID             uint16
	GID             [16]byte
	MTU             uint8 // enum ibv_mtu: 1=256 … 5=4096
	MaxDestRdAtomic uint8 // its responder depth
	QPs             []qpAddr
}

// regionRecord is what a client needs to read the server's region.
type regionRecord struct {
	Addr      uint64
	Length    uint64
	Seed      uint64
	Patterned bool
	ODP       bool // registered with on-demand paging
	Pipelined bool // the rkeys come in ready-region messages
	Windowed  bool // the client releases each memory region once read
	// MRSize is the length of every memory region but the last, which
	// ends at Length; RKeys has one rkey per memory region, in order.
	MRSize uint64
	RKeys  []uint32
}

// regionFixedLen is the region record before its rkeys.
const regionFixedLen = 8 + 8 + 8 + 1 + 8 + 2

// maxRegions bounds the memory regions one file is registered as; their
// rkeys fit a welcome with room to spare.
const maxRegions = results.MaxRegions

// rkeyAt returns the rkey of the memory region holding byte off.
func (r regionRecord) rkeyAt(off uint64) uint32 { return r.RKeys[off/r.MRSize] }

// cmRecord is what a connect-cm client needs to connect its QPs.
type cmRecord struct {
	Port            uint16 // the server's rdma_cm port
	MaxDestRdAtomic uint8  // its responder depth
	Token           [16]byte
}

const cmLen = 2 + 1 + 16

func (r cmRecord) encode() []byte {
	b := binary.BigEndian.AppendUint16(nil, r.Port)
	b = append(b, r.MaxDestRdAtomic)
	return append(b, r.Token[:]...)
}

func decodeCM(b []byte) (cmRecord, []byte, error) {
	var r cmRecord
	if len(b) < cmLen {
		return r, nil, fmt.Errorf("%w: welcome-cm of %d bytes is shorter than %d", errProtocol, len(b), cmLen)
	}
	r.Port, r.MaxDestRdAtomic = binary.BigEndian.Uint16(b), b[2]
	copy(r.Token[:], b[3:cmLen])
	if r.Port == 0 {
		return r, nil, fmt.Errorf("%w: welcome-cm names rdma_cm port 0", errProtocol)
	}
	return r, b[cmLen:], nil
}

// cmRequest is the private data of one rdma_cm connect request.
func cmRequest(token [16]byte, index int) []byte {
	return binary.BigEndian.AppendUint16(append([]byte(nil), token[:]...), uint16(index))
}

func (e endpoint) encode() []byte {
	b := make([]byte, 0, 22+8*len(e.QPs))
	b = binary.BigEndian.AppendUint16(b, e.LID)
	b = append(b, e.GID[:]...)
	b = append(b, e.MTU, e.MaxDestRdAtomic)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.QPs)))
	for _, q := range e.QPs {
		b = binary.BigEndian.AppendUint32(b, q.QPN)
		b = binary.BigEndian.AppendUint32(b, q.PSN)
	}
	return b
}

// decodeEndpoint parses an endpoint at the start of b and returns the rest.
func decodeEndpoint(b []byte) (endpoint, []byte, error) {
	var e endpoint
	if len(b) < 22 {
		return e, nil, fmt.Errorf("%w: endpoint of %d bytes is shorter than 22", errProtocol, len(b))
	}
	e.LID = binary.BigEndian.Uint16(b)
	copy(e.GID[:], b[2:18])
	e.MTU, e.MaxDestRdAtomic = b[18], b[19]
	n := int(binary.BigEndian.Uint16(b[20:]))
	b = b[22:]
	if n == 0 || n > maxQPs {
		return e, nil, fmt.Errorf("%w: endpoint lists %d QPs (want 1..%d)", errProtocol, n, maxQPs)
	}
	if len(b) < 8*n {
		return e, nil, fmt.Errorf("%w: endpoint lists %d QPs but holds only %d bytes for them", errProtocol, n, len(b))
	}
	if e.MTU < 1 || e.MTU > 5 {
		return e, nil, fmt.Errorf("%w: endpoint mtu code %d (want 1..5)", errProtocol, e.MTU)
	}
	e.QPs = make([]qpAddr, n)
	for i := range e.QPs {
		e.QPs[i] = qpAddr{QPN: binary.BigEndian.Uint32(b[8*i:]), PSN: binary.BigEndian.Uint32(b[8*i+4:])}
	}
	return e, b[8*n:], nil
}

func (r regionRecord) encode() []byte {
	b := make([]byte, 0, regionFixedLen+4*len(r.RKeys))
	b = binary.BigEndian.AppendUint64(b, r.Addr)
	b = binary.BigEndian.AppendUint64(b, r.Length)
	b = binary.BigEndian.AppendUint64(b, r.Seed)
	p := byte(0)
	if r.Patterned {
		p |= 1
	}
	if r.ODP {
		p |= 2
	}
	if r.Pipelined {
		p |= 4
	}
	if r.Windowed {
		p |= 8
	}
	b = append(b, p)
	b = binary.BigEndian.AppendUint64(b, r.MRSize)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.RKeys)))
	for _, k := range r.RKeys {
		b = binary.BigEndian.AppendUint32(b, k)
	}
	return b
}

// decodeRegion decodes a region record, which must end the message, and
// checks that its memory regions tile the region exactly.
func decodeRegion(b []byte) (regionRecord, error) {
	if len(b) < regionFixedLen {
		return regionRecord{}, fmt.Errorf("%w: region record of %d bytes is shorter than %d", errProtocol, len(b), regionFixedLen)
	}
	r := regionRecord{
		Addr:      binary.BigEndian.Uint64(b),
		Length:    binary.BigEndian.Uint64(b[8:]),
		Seed:      binary.BigEndian.Uint64(b[16:]),
		Patterned: b[24]&1 != 0,
		ODP:       b[24]&2 != 0,
		Pipelined: b[24]&4 != 0,
		Windowed:  b[24]&8 != 0,
		MRSize:    binary.BigEndian.Uint64(b[25:]),
	}
	n := int(binary.BigEndian.Uint16(b[33:]))
	if want := regionFixedLen + 4*n; len(b) != want {
		return regionRecord{}, fmt.Errorf("%w: region record of %d bytes (want %d for %d rkeys)", errProtocol, len(b), want, n)
	}
	if n == 0 || n > maxRegions || r.Length == 0 || r.MRSize == 0 || r.Length > math.MaxInt64 || r.MRSize > math.MaxInt64 ||
		results.MRCount(int64(r.Length), int64(r.MRSize)) != int64(n) {
		return regionRecord{}, fmt.Errorf("%w: %d memory regions of %d bytes do not cover a region of %d bytes", errProtocol, n, r.MRSize, r.Length)
	}
	r.RKeys = make([]uint32, n)
	for i := range r.RKeys {
		r.RKeys[i] = binary.BigEndian.Uint32(b[regionFixedLen+4*i:])
	}
	return r, nil
}

func writeMsg(w io.Writer, kind byte, body []byte) error {
	if len(body) > maxBody {
		return fmt.Errorf("%w: %s body of %d bytes is over %d", errProtocol, kindName(kind), len(body), maxBody)
	}
	b := make([]byte, 0, headerLen+len(body))
	b = append(b, wireMagic...)
	b = append(b, wireVersion, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("send %s: %w", kindName(kind), err)
	}
	return nil
}

// readMsg reads one frame and returns its kind and body. The kind must be one
// of want.
func readMsg(r io.Reader, want ...byte) (byte, []byte, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, fmt.Errorf("receive %s: %w", kindName(want[0]), err)
	}
	if string(h[:4]) != wireMagic {
		return 0, nil, fmt.Errorf("%w: bad magic %q: the peer is not an rdmasweep rdma node", errProtocol, h[:4])
	}
	if h[4] != wireVersion {
		return 0, nil, fmt.Errorf("%w: peer speaks exchange version %d, this node %d: deploy the same node build on both hosts", errProtocol, h[4], wireVersion)
	}
	kind := h[5]
	n := binary.BigEndian.Uint32(h[6:])
	if n > maxBody {
		return 0, nil, fmt.Errorf("%w: %s body of %d bytes is over %d", errProtocol, kindName(kind), n, maxBody)
	}
	ok := false
	for _, k := range want {
		ok = ok || k == kind
	}
	if !ok {
		return 0, nil, fmt.Errorf("%w: got %s, want %s", errProtocol, kindName(kind), kindName(want[0]))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("receive %s body: %w", kindName(kind), err)
	}
	return kind, body, nil
}

// guardConn bounds a handshake on c by handshakeTimeout and by ctx; the
// returned stop lifts both.
func guardConn(ctx context.Context, c net.Conn) (stop func()) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	unwatch := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() {
		unwatch()
		c.SetDeadline(time.Time{})
	}
}

// ctxErr prefers ctx's error to err when ctx is done, since a cancelled
// handshake shows up as an i/o timeout on the conn.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// serverSession is what the server's prepare callback built for one client:
// its endpoint, and whatever must be released if the handshake then fails.
type serverSession interface {
	endpoint() endpoint
	close()
}

// cmSession is a serverSession for a connect-cm client: the welcome
// carries its cm record instead of an endpoint.
type cmSession interface {
	serverSession
	cm() cmRecord
}

// hello is a client's hello: an endpoint (connect tcp), or the number of
// QPs it will connect through rdma_cm.
type hello struct {
	cm  bool
	ep  endpoint // connect tcp
	qps int      // connect cm
}

// serverHandshake runs the server's side on c for connect tcp. prepare is
// called only once the client has authenticated; it sets up the QPs for
// the client's endpoint. On success the caller owns the returned session.
func serverHandshake(ctx context.Context, c net.Conn, secret []byte, region regionRecord,
	prepare func(client endpoint) (serverSession, error)) (serverSession, error) {
	return serverHandshakeMode(ctx, c, secret, region, false, func(h hello) (serverSession, error) { return prepare(h.ep) })
}

// serverHandshakeMode is serverHandshake for either connect mode: a hello
// of the other mode is refused with a message saying so.
func serverHandshakeMode(ctx context.Context, c net.Conn, secret []byte, region regionRecord, cm bool,
	prepare func(h hello) (serverSession, error)) (serverSession, error) {
	defer guardConn(ctx, c)()
	nonce := make([]byte, transport.NonceSize)
	if err := transport.NewNonce(nonce); err != nil {
		return nil, err
	}
	auth := byte(0)
	if secret != nil {
		auth = 1
	}
	if err := writeMsg(c, kindChallenge, append([]byte{auth}, nonce...)); err != nil {
		return nil, ctxErr(ctx, err)
	}
	kind, body, err := readMsg(c, kindHello, kindHelloCM)
	if err != nil {
		return nil, refuse(c, ctxErr(ctx, err))
	}
	mine, theirs := results.ConnectTCP, results.ConnectCM
	if cm {
		mine, theirs = results.ConnectCM, results.ConnectTCP
	}
	if (kind == kindHelloCM) != cm {
		return nil, refuse(c, fmt.Errorf("%w: the client connects its QPs with connect %s, this server with connect %s; hint: set rdma.connect the same for both hosts", errProtocol, theirs, mine))
	}
	var h hello
	var rest []byte
	if cm {
		if len(body) < 2 {
			return nil, refuse(c, fmt.Errorf("%w: hello-cm of %d bytes", errProtocol, len(body)))
		}
		h = hello{cm: true, qps: int(binary.BigEndian.Uint16(body))}
		rest = body[2:]
		if h.qps == 0 || h.qps > maxQPs {
			return nil, refuse(c, fmt.Errorf("%w: hello-cm asks for %d QPs (want 1..%d)", errProtocol, h.qps, maxQPs))
		}
	} else {
		h.ep, rest, err = decodeEndpoint(body)
		if err != nil {
			return nil, refuse(c, err)
		}
	}
	if len(rest) != transport.MACSize {
		return nil, refuse(c, fmt.Errorf("%w: hello carries %d bytes after the endpoint (want %d)", errProtocol, len(rest), transport.MACSize))
	}
	if secret != nil {
		if !transport.Admit(secret, nonce, body[:len(body)-len(rest)], rest) {
			writeMsg(c, kindRefusal, []byte(transport.ErrAuth.Error()))
			return nil, fmt.Errorf("%w: the client does not hold this run's secret", transport.ErrAuth)
		}
	}
	sess, err := prepare(h)
	if err != nil {
		writeMsg(c, kindRefusal, []byte(err.Error()))
		return nil, err
	}
	wkind, welcome := byte(kindWelcome), sess.endpoint().encode()
	if cs, ok := sess.(cmSession); ok {
		wkind, welcome = kindWelcomeCM, cs.cm().encode()
	}
	if err := writeMsg(c, wkind, append(welcome, region.encode()...)); err != nil {
		sess.close()
		return nil, ctxErr(ctx, err)
	}
	return sess, nil
}

// refuse tells the peer why its message was refused, when it was malformed
// rather than cut off, so a mismatched node says what is wrong on both sides.
// It returns err.
func refuse(c net.Conn, err error) error {
	if errors.Is(err, errProtocol) {
		writeMsg(c, kindRefusal, []byte(err.Error()))
	}
	return err
}

// clientHandshake runs the client's side on c for connect tcp: it sends
// ours and returns the server's endpoint and region.
func clientHandshake(ctx context.Context, c net.Conn, secret []byte, ours endpoint) (endpoint, regionRecord, error) {
	theirs, _, reg, err := clientHandshakeMode(ctx, c, secret, hello{ep: ours})
	return theirs, reg, err
}

// clientHandshakeMode runs the client's side for either connect mode. It
// returns the server's endpoint (connect tcp) or cm record (connect cm).
func clientHandshakeMode(ctx context.Context, c net.Conn, secret []byte, h hello) (endpoint, cmRecord, regionRecord, error) {
	defer guardConn(ctx, c)()
	fail := func(err error) (endpoint, cmRecord, regionRecord, error) {
		return endpoint{}, cmRecord{}, regionRecord{}, err
	}
	_, body, err := readMsg(c, kindChallenge)
	if err != nil {
		return fail(ctxErr(ctx, err))
	}
	if len(body) != 1+transport.NonceSize {
		return fail(fmt.Errorf("%w: challenge of %d bytes (want %d)", errProtocol, len(body), 1+transport.NonceSize))
	}
	kind, hb := byte(kindHello), h.ep.encode()
	if h.cm {
		kind, hb = kindHelloCM, binary.BigEndian.AppendUint16(nil, uint16(h.qps))
	}
	mac := make([]byte, transport.MACSize)
	if body[0] == 1 {
		if secret == nil {
			return fail(fmt.Errorf("%w: the server asks for the run's secret and this client has none", transport.ErrAuth))
		}
		mac = transport.Answer(secret, body[1:], hb)
	}
	if err := writeMsg(c, kind, append(hb, mac...)); err != nil {
		return fail(ctxErr(ctx, err))
	}
	want := byte(kindWelcome)
	if h.cm {
		want = kindWelcomeCM
	}
	kind, body, err = readMsg(c, want, kindRefusal)
	if err != nil {
		return fail(ctxErr(ctx, err))
	}
	if kind == kindRefusal {
		msg := printable(body)
		if msg == transport.ErrAuth.Error() {
			return fail(fmt.Errorf("server refused the client: %w", transport.ErrAuth))
		}
		return fail(fmt.Errorf("server refused the client: %s", msg))
	}
	var theirs endpoint
	var cmr cmRecord
	var rest []byte
	if h.cm {
		cmr, rest, err = decodeCM(body)
	} else {
		theirs, rest, err = decodeEndpoint(body)
		if err == nil && len(theirs.QPs) != len(h.ep.QPs) {
			err = fmt.Errorf("%w: server answered with %d QPs for our %d", errProtocol, len(theirs.QPs), len(h.ep.QPs))
		}
	}
	if err != nil {
		return fail(err)
	}
	reg, err := decodeRegion(rest)
	if err != nil {
		return fail(err)
	}
	return theirs, cmr, reg, nil
}

// byeBody encodes the client's final counts.
func byeBody(bytesRead, reads int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(bytesRead))
	return binary.BigEndian.AppendUint64(b, uint64(reads))
}

// sendAbort tells the server why the client gave up after the handshake,
// so the server's error says it too. It is best effort: the connection may
// already be gone.
func sendAbort(c net.Conn, reason error) {
	msg := reason.Error()
	if len(msg) > maxAbortLen {
		msg = msg[:maxAbortLen]
	}
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	writeMsg(c, kindAbort, []byte(msg))
}

// readEnd waits for the client's bye and returns its counts. A client that
// aborts, disconnects or sends anything else instead fails with an error
// wrapping errClientFailed (with its reason, when it sent one): without a
// bye the server cannot know what was read. With release set (a window),
// the client's releases before its bye are passed to it, index by index;
// its error ends the wait.
func readEnd(c net.Conn, release func(index int) error) (bytesRead, reads int64, err error) {
	want := []byte{kindBye, kindAbort}
	if release != nil {
		want = append(want, kindRelease)
	}
	kind, body, err := readMsg(c, want...)
	for err == nil && kind == kindRelease {
		if len(body) != 2 {
			return 0, 0, fmt.Errorf("%w: %w: release of %d bytes (want 2)", errClientFailed, errProtocol, len(body))
		}
		if err := release(int(binary.BigEndian.Uint16(body))); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", errClientFailed, err)
		}
		kind, body, err = readMsg(c, want...)
	}
	switch {
	case err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)):
		return 0, 0, fmt.Errorf("%w: it disconnected without a bye (it failed or was killed; its own error says why)", errClientFailed)
	case err != nil:
		return 0, 0, fmt.Errorf("%w: waiting for its bye: %w", errClientFailed, err)
	case kind == kindAbort:
		return 0, 0, fmt.Errorf("%w: %s", errClientFailed, printable(body))
	case len(body) != 16:
		return 0, 0, fmt.Errorf("%w: %w: bye of %d bytes (want 16)", errClientFailed, errProtocol, len(body))
	}
	return int64(binary.BigEndian.Uint64(body)), int64(binary.BigEndian.Uint64(body[8:])), nil
}

// printable makes a peer's message one line of valid UTF-8, at most
// maxAbortLen bytes.
func printable(b []byte) string {
	if len(b) > maxAbortLen {
		b = b[:maxAbortLen]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "?"))
}

// releaseBody encodes a release message: the client's READs of memory
// region index have all completed.
func releaseBody(index int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(index)) }

// regionBody encodes a ready-region message: memory region index is
// registered with rkey, in the mapping at addr.
func regionBody(index int, rkey uint32, addr uint64) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(index))
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(b, rkey), addr)
}

// readRegion reads the server's next ready-region message, which must
// announce memory region want of n. A server whose preparation failed
// sends an abort instead, and its reason is the error.
func readRegion(r io.Reader, want, n int) (rkey uint32, addr uint64, err error) {
	kind, body, err := readMsg(r, kindRegion, kindAbort)
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("waiting for memory region %d of %d: %w", want+1, n, err)
	case kind == kindAbort:
		return 0, 0, fmt.Errorf("the server's preparation of memory region %d of %d failed: %s", want+1, n, printable(body))
	case len(body) != 14:
		return 0, 0, fmt.Errorf("%w: ready-region of %d bytes (want 14)", errProtocol, len(body))
	}
	if i := int(binary.BigEndian.Uint16(body)); i != want {
		return 0, 0, fmt.Errorf("%w: ready-region announces memory region %d, want %d (they come in order)", errProtocol, i+1, want+1)
	}
	return binary.BigEndian.Uint32(body[2:]), binary.BigEndian.Uint64(body[6:]), nil
}
