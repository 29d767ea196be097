package counters

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Process reads the calling process's own page faults and context
// switches (getrusage RUSAGE_SELF), over its life so far.
func Process() (Snapshot, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return nil, fmt.Errorf("getrusage: %w", err)
	}
	return Snapshot{
		"minor_faults":     uint64(ru.Minflt),
		"major_faults":     uint64(ru.Majflt),
		"voluntary_ctxt":   uint64(ru.Nvcsw),
		"involuntary_ctxt": uint64(ru.Nivcsw),
	}, nil
}

// TCPStats are one connection's own figures from TCP_INFO: not the host's,
// which other traffic moves too.
type TCPStats struct {
	TotalRetrans uint32        // tcpi_total_retrans: segments retransmitted over the connection's life
	RTT          time.Duration // tcpi_rtt: the smoothed round trip
	RTTVar       time.Duration // tcpi_rttvar
	// DSACKDups is tcpi_dsack_dups: retransmits the peer reported it had
	// already received (D-SACK), i.e. spurious ones, such as a loss
	// probe sent when only the ACK was late.
	DSACKDups uint32
}

// TCP reads conn's TCP_INFO.
func TCP(conn *net.TCPConn) (TCPStats, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return TCPStats{}, fmt.Errorf("read TCP_INFO: %w", err)
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return TCPStats{}, fmt.Errorf("read TCP_INFO: %w", err)
	}
	if serr != nil {
		return TCPStats{}, fmt.Errorf("read TCP_INFO: %w", serr)
	}
	return TCPStats{
		TotalRetrans: info.Total_retrans,
		RTT:          time.Duration(info.Rtt) * time.Microsecond,
		RTTVar:       time.Duration(info.Rttvar) * time.Microsecond,
		DSACKDups:    info.Dsack_dups,
	}, nil
}
