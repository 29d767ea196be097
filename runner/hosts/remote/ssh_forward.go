package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// LoopbackExposed reports whether the host's sshd bound ln, a listener of
// ListenLoopback, to other addresses than the loopback: sshd's
// `GatewayPorts yes` binds every remote forward to every address,
// whatever address the client asked for, and tells the client nothing.
// It reads what the host's kernel lists as listening on ln's port
// (/proc/net/tcp and tcp6, so a Linux host), and returns those addresses.
func (s *SSH) LoopbackExposed(ctx context.Context, ln net.Listener) ([]netip.Addr, error) {
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("forward's address %v: not TCP", ln.Addr())
	}
	out, err := s.Run(ctx, []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"})
	var ee *ExitError
	if err != nil && !(errors.As(err, &ee) && len(out) > 0) { // a host without IPv6 has no tcp6
		return nil, fmt.Errorf("read the host's listening sockets: %w", err)
	}
	var wide []netip.Addr
	for _, a := range listening(out, ta.Port) {
		if !a.IsLoopback() {
			wide = append(wide, a)
		}
	}
	return wide, nil
}

// listening is the local addresses of the sockets in LISTEN state on port
// in procNetTCP, the text of /proc/net/tcp or tcp6 (or both). The kernel
// writes each address as the hex of its bytes in 32-bit words of host
// order (little-endian here), then the port in hex.
func listening(procNetTCP []byte, port int) []netip.Addr {
	var addrs []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(procNetTCP))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		ipHex, portHex, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(portHex, 16, 16); !ok || err != nil || int(p) != port {
			continue
		}
		b, err := hex.DecodeString(ipHex)
		if err != nil || (len(b) != 4 && len(b) != 16) {
			continue
		}
		for i := 0; i+4 <= len(b); i += 4 { // each word to network order
			b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
		}
		if a, ok := netip.AddrFromSlice(b); ok {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}
