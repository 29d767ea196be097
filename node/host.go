package main

// node host: what this host offers a run, as node sees it, so runner check
// can judge memory (pinning beyond MemAvailable is refused) without a
// round trip of its own per fact.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"rdmasweep/node/meminfo"
	"rdmasweep/results"
)

func runHost(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON line instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := hostFacts()
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	memlock := "unlimited"
	if h.MemlockBytes >= 0 {
		memlock = strconv.FormatInt(h.MemlockBytes, 10) + " bytes"
	}
	_, err = fmt.Fprintf(e.stdout, "kernel %s\nmemory %d bytes, %d available\nmemlock %s (cap_ipc_lock %v, cap_sys_resource %v)\nnuma nodes %d\npage size %d\n",
		h.Kernel, h.MemTotalBytes, h.MemAvailableBytes, memlock, h.CapIPCLock, h.CapSysResource, h.NUMANodes, h.PageSize)
	return err
}

func hostFacts() (results.Host, error) {
	h := results.Host{Type: results.TypeHost, MemlockBytes: -1, NUMANodes: 1, PageSize: os.Getpagesize()}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return h, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	h.MemTotalBytes, h.MemAvailableBytes = meminfoOr(b, "MemTotal"), meminfoOr(b, "MemAvailable")
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r) == nil {
		if r.Cur != unix.RLIM_INFINITY {
			h.MemlockBytes = int64(r.Cur)
		}
		hard := int64(-1)
		if r.Max != unix.RLIM_INFINITY {
			hard = int64(r.Max)
		}
		h.MemlockHardBytes = &hard
	}
	h.CapIPCLock = hasCap(unix.CAP_IPC_LOCK)
	h.CapSysResource = hasCap(unix.CAP_SYS_RESOURCE)
	if nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*"); len(nodes) > 0 {
		h.NUMANodes = len(nodes)
	}
	return h, nil
}

// meminfoOr is a /proc/meminfo field in bytes, or -1 where the host has
// none.
func meminfoOr(b []byte, name string) int64 {
	n, err := meminfo.Field(b, name)
	if err != nil {
		return -1
	}
	return n
}

// hasCap reads whether capability c is in the effective set, from
// /proc/self/status.
func hasCap(c int) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			set, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && set&(1<<c) != 0
		}
	}
	return false
}
