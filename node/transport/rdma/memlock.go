//go:build rdma

package rdma

// What pinning a region needs of the process and the host, for both
// roles: RLIMIT_MEMLOCK raised or CAP_IPC_LOCK held, and memory to pin.

import (
	"fmt"

	"rdmasweep/node/meminfo"
	"rdmasweep/results"

	"golang.org/x/sys/unix"
)

// raiseMemlock makes sure need bytes can be pinned. It raises the soft
// RLIMIT_MEMLOCK to unlimited (which CAP_SYS_RESOURCE allows), or to the
// hard limit, and fails naming the capability and the limit needed when
// that is not enough and the process lacks CAP_IPC_LOCK, whose holder the
// limit does not bind. Being root is not enough: root in a container
// with the default capabilities holds neither.
func raiseMemlock(need uint64, what string) error {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		return fmt.Errorf("read RLIMIT_MEMLOCK: %w", err)
	}
	if r.Cur == unix.RLIM_INFINITY || r.Cur >= need {
		return nil
	}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}) == nil {
		return nil
	}
	if r.Max == unix.RLIM_INFINITY || r.Max >= need {
		r.Cur = r.Max
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
			return fmt.Errorf("raise RLIMIT_MEMLOCK to %d: %w", r.Max, err)
		}
		return nil
	}
	if capEffective(unix.CAP_IPC_LOCK) {
		return nil
	}
	return fmt.Errorf("%s needs %d bytes of locked memory, but RLIMIT_MEMLOCK allows %d (hard limit %d) and the process holds neither CAP_IPC_LOCK nor CAP_SYS_RESOURCE; hint: %s",
		what, need, r.Cur, r.Max, memlockHint(need))
}

// memlockHint says how to let node pin need bytes.
func memlockHint(need uint64) string { return results.MemlockHint(int64(need)) }

// capEffective reports whether capability c is in the effective set.
func capEffective(c int) bool {
	var d [2]unix.CapUserData
	if unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &d[0]) != nil {
		return false
	}
	return d[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// checkPinnable refuses to pin need bytes when the host has less
// available memory: the pin would not fail cleanly, it would bring in the
// OOM killer.
func checkPinnable(need int64, what string) error {
	avail, err := meminfo.Available()
	if err != nil {
		return nil // not Linux as we know it: let the registration say
	}
	return pinnable(need, avail, what)
}
