// Package wiretap is an eavesdropper for tests: it captures what crosses
// a network interface (AF_PACKET, as tcpdump does), puts each TCP
// connection's bytes back in order, and can inject a TCP segment into a
// connection it has seen, as an on-path host that knows the sequence
// numbers can. It needs root (CAP_NET_RAW).
package wiretap

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/testbed/testenv"
)

// Tap captures IPv4 TCP on one interface until its test ends.
type Tap struct {
	fd   int
	mu   sync.Mutex
	segs []Segment
	done chan struct{}
}

// Segment is one captured TCP segment.
type Segment struct {
	Src, Dst netip4
	SrcPort  uint16
	DstPort  uint16
	Seq, Ack uint32
	Flags    uint8
	Options  []byte
	Payload  []byte
	SrcMAC   net.HardwareAddr
	DstMAC   net.HardwareAddr
}

type netip4 [4]byte

func (a netip4) String() string { return net.IP(a[:]).String() }

// TCP flags.
const (
	FIN = 0x01
	SYN = 0x02
	RST = 0x04
	PSH = 0x08
	ACK = 0x10
)

// Start captures on ifname until the test ends.
func Start(t testing.TB, ifname string) *Tap {
	t.Helper()
	testenv.NeedRoot(t)
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatalf("wiretap: %v", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatalf("wiretap: AF_PACKET socket: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		t.Fatalf("wiretap: bind to %s: %v", ifname, err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	tp := &Tap{fd: fd, done: make(chan struct{})}
	stop := make(chan struct{})
	go tp.capture(stop)
	t.Cleanup(func() {
		close(stop)
		<-tp.done
		unix.Close(fd)
	})
	return tp
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (tp *Tap) capture(stop chan struct{}) {
	defer close(tp.done)
	buf := make([]byte, 1<<16)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, _, err := unix.Recvfrom(tp.fd, buf, 0)
		if err != nil || n < 14 {
			continue
		}
		if s, ok := parse(buf[:n]); ok {
			tp.mu.Lock()
			tp.segs = append(tp.segs, s)
			tp.mu.Unlock()
		}
	}
}

// parse reads an Ethernet frame holding IPv4 TCP.
func parse(f []byte) (Segment, bool) {
	if binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_IP {
		return Segment{}, false
	}
	ip := f[14:]
	if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_TCP {
		return Segment{}, false
	}
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total > len(ip) || total < ihl+20 {
		total = len(ip) // offloaded: the length field may be 0
	}
	tcp := ip[ihl:total]
	off := int(tcp[12]>>4) * 4
	if off < 20 || off > len(tcp) {
		return Segment{}, false
	}
	s := Segment{
		SrcPort: binary.BigEndian.Uint16(tcp[0:2]), DstPort: binary.BigEndian.Uint16(tcp[2:4]),
		Seq: binary.BigEndian.Uint32(tcp[4:8]), Ack: binary.BigEndian.Uint32(tcp[8:12]),
		Flags: tcp[13], Options: bytes.Clone(tcp[20:off]), Payload: bytes.Clone(tcp[off:]),
		DstMAC: bytes.Clone(f[0:6]), SrcMAC: bytes.Clone(f[6:12]),
	}
	copy(s.Src[:], ip[12:16])
	copy(s.Dst[:], ip[16:20])
	return s, true
}

// Segments is what was captured so far, in order.
func (tp *Tap) Segments() []Segment {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.segs)
}

// Flow is one direction of a TCP connection.
type Flow struct {
	Src, Dst string // ip:port
	ISN      uint32 // from its SYN, if seen
	SawSYN   bool
	Data     []byte // its payload, in sequence order, each byte once
	Next     uint32 // the sequence number after its last byte
	Last     Segment
}

// Flows puts every captured direction of every connection back in order,
// by source and destination.
func (tp *Tap) Flows() map[[2]string]*Flow {
	flows := map[[2]string]*Flow{}
	type piece struct {
		seq  uint32
		data []byte
	}
	pieces := map[[2]string][]piece{}
	for _, s := range tp.Segments() {
		src := net.JoinHostPort(s.Src.String(), itoa(s.SrcPort))
		dst := net.JoinHostPort(s.Dst.String(), itoa(s.DstPort))
		k := [2]string{src, dst}
		f := flows[k]
		if f == nil {
			f = &Flow{Src: src, Dst: dst}
			flows[k] = f
		}
		if s.Flags&SYN != 0 {
			f.ISN, f.SawSYN = s.Seq, true
			pieces[k] = nil // a new connection on the same ports
			f.Data = nil
		}
		f.Last = s
		if len(s.Payload) > 0 {
			pieces[k] = append(pieces[k], piece{s.Seq, s.Payload})
		}
	}
	for k, f := range flows {
		ps := pieces[k]
		base := f.ISN + 1
		if !f.SawSYN && len(ps) > 0 {
			base = ps[0].seq
		}
		slices.SortStableFunc(ps, func(a, b piece) int { return int(int32(a.seq - b.seq)) })
		next := base
		for _, p := range ps {
			end := p.seq + uint32(len(p.data))
			if int32(end-next) <= 0 {
				continue // a retransmission
			}
			if skip := int32(next - p.seq); skip > 0 {
				p.data = p.data[skip:]
			}
			f.Data = append(f.Data, p.data...)
			next = end
		}
		f.Next = next
	}
	return flows
}

func itoa(v uint16) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
		if v == 0 {
			return string(b)
		}
	}
}

// All is every flow's bytes, joined, for a search.
func (tp *Tap) All() []byte {
	var b []byte
	for _, f := range tp.Flows() {
		b = append(b, f.Data...)
		b = append(b, 0)
	}
	return b
}

// Inject sends payload into the connection from src to dst (ip:port
// each) as src would: the next sequence number src would use, the ack of
// everything dst sent, the options (timestamps) of src's last segment. It
// goes through a raw IP socket of this namespace.
func (tp *Tap) Inject(t testing.TB, src, dst string, payload []byte) {
	t.Helper()
	flows := tp.Flows()
	out, in := flows[[2]string{src, dst}], flows[[2]string{dst, src}]
	if out == nil || in == nil {
		t.Fatalf("wiretap: no connection %s -> %s seen", src, dst)
	}
	sip, sport := splitAddr(t, src)
	dip, dport := splitAddr(t, dst)
	opts := out.Last.Options
	tcp := make([]byte, 20+len(opts)+len(payload))
	binary.BigEndian.PutUint16(tcp[0:2], sport)
	binary.BigEndian.PutUint16(tcp[2:4], dport)
	binary.BigEndian.PutUint32(tcp[4:8], out.Next)
	binary.BigEndian.PutUint32(tcp[8:12], in.Next)
	tcp[12] = byte((20+len(opts))/4) << 4
	tcp[13] = PSH | ACK
	binary.BigEndian.PutUint16(tcp[14:16], 65535)
	copy(tcp[20:], opts)
	copy(tcp[20+len(opts):], payload)
	pseudo := append(append(append([]byte{}, sip...), dip...), 0, unix.IPPROTO_TCP, byte(len(tcp)>>8), byte(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:18], checksum(append(pseudo, tcp...)))
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:4], uint16(20+len(tcp)))
	copy(ip[12:16], sip)
	copy(ip[16:20], dip)
	binary.BigEndian.PutUint16(ip[10:12], checksum(ip))
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		t.Fatalf("wiretap: raw socket: %v", err)
	}
	defer unix.Close(fd)
	var to unix.SockaddrInet4
	copy(to.Addr[:], dip)
	if err := unix.Sendto(fd, append(ip, tcp...), 0, &to); err != nil {
		t.Fatalf("wiretap: inject into %s -> %s: %v", src, dst, err)
	}
	time.Sleep(50 * time.Millisecond)
}

func splitAddr(t testing.TB, a string) ([]byte, uint16) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		t.Fatal(err)
	}
	port := 0
	for _, c := range p {
		port = port*10 + int(c-'0')
	}
	return net.ParseIP(h).To4(), uint16(port)
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
